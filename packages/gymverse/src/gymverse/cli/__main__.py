"""``python -m gymverse.cli``."""

import sys

from gymverse.cli import main

sys.exit(main())
