"""The benchmark scripts are not a package: make `benchmarks/` and `benchmarks/frameworks/` importable."""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
for folder in (BENCHMARKS, BENCHMARKS / "frameworks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
