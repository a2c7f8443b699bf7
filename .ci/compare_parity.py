"""The cross-adapter parity check: the four adapters, each tested in its own framework environment, computed the
same per-token advantages and curriculum records for core's parity batch (`gymverse.testing.parity`).

Each adapter's parity test writes ``$GYMVERSE_PARITY_OUT/<adapter>.json``; this compares every pair and each with
core's own expectation, prints one row per adapter, and exits 1 on a missing adapter or any difference > 1e-6.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from gymverse.testing.parity import CASES, expected_advantages, expected_curriculum, parity_trajectories

ADAPTERS = ("verl", "openrlhf", "oat", "rl2")
ATOL = 1e-6


def main() -> int:
    """Compare; print the table; exit code 1 on a mismatch."""
    folder = Path(sys.argv[1])
    trajs = parity_trajectories()
    want = [np.asarray(a, dtype=np.float64) for a in expected_advantages(trajs)]
    want_curriculum = {k: sorted(v) for k, v in expected_curriculum(trajs).items()}
    failed = False
    print(f"{'adapter':<10} {'episodes':>8} {'tokens':>7} {'max |diff| vs core':>19} {'curriculum':>11}")
    for name in ADAPTERS:
        path = folder / f"{name}.json"
        if not path.exists():
            print(f"{name:<10} missing: its parity test did not run (no {path})")
            failed = True
            continue
        got = json.loads(path.read_text())
        advs = [np.asarray(a, dtype=np.float64) for a in got["advantages"]]
        shapes_ok = len(advs) == len(CASES) and all(a.shape == w.shape for a, w in zip(advs, want))
        diff = max((float(np.abs(a - w).max()) if a.size else 0.0) for a, w in zip(advs, want)) if shapes_ok else None
        same_curriculum = got["curriculum"] == want_curriculum
        ok = shapes_ok and diff is not None and diff <= ATOL and same_curriculum
        failed |= not ok
        tokens = sum(a.size for a in advs)
        shown = "shape mismatch" if diff is None else f"{diff:.2e}"
        print(f"{name:<10} {len(advs):>8} {tokens:>7} {shown:>19} {'same' if same_curriculum else 'DIFFERENT':>11}")
    print("parity: " + ("FAILED" if failed else f"all {len(ADAPTERS)} adapters agree with core and each other"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
