"""Loaded by Python at start-up in every process whose ``PYTHONPATH`` holds this folder (the launcher test's
launcher and all its Ray workers): installs the CPU harness of `cpu_run_harness`, only when its variables are set.
"""

import cpu_run_harness

cpu_run_harness.install()
