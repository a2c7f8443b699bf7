"""Throughput of PERPO environment-level normalization (transitions/s), numpy and torch CPU vs a naive loop.

Setup: N transitions (default 1M) spread over E envs (default 64). Variants:

* ``numpy codes``   env ids as an int array (what adapters hold), `env_normalize(G, ids)` (includes id mapping)
* ``numpy dense``   ids already dense codes, ``num_groups=E`` (skips the mapping)
* ``numpy strings`` env ids as a Python list of ``"family:Name"`` strings
* ``torch codes``   float64 CPU tensor + int64 tensor ids (same gymverse code path)
* ``numpy generic`` the standard-only sort + cumsum segment sums (what other array-API namespaces get)
* ``naive loop``    for each env: boolean mask, mean, std, normalize (the straightforward per-env Python loop)

Prints a rich table with the median of R repeats and writes ``benchmarks/results/perpo_math.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymverse.perpo import env_normalize
from gymverse.perpo._xp import generic_kernels
from rich.console import Console
from rich.table import Table

TARGET = 10_000_000


def naive(g: np.ndarray, ids: np.ndarray, eps: float = 1e-9) -> np.ndarray:
    """Per-env Python loop (the obvious implementation)."""
    out = np.empty_like(g)
    for e in np.unique(ids):
        m = ids == e
        x = g[m]
        out[m] = (x - x.mean()) / (x.std() + eps)
    return out


def timeit(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Wall times of `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "perpo_math.json"))
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    ids = rng.integers(0, args.envs, size=args.n)
    g = rng.normal(size=args.n) * rng.uniform(0.5, 3.0, size=args.envs)[ids] + rng.normal(size=args.envs)[ids]
    names = [f"family:Env{i}" for i in range(args.envs)]
    str_ids = [names[i] for i in ids]
    expected = naive(g, ids)

    def generic() -> Any:
        with generic_kernels():
            return env_normalize(g, ids)

    variants: dict[str, Callable[[], Any]] = {
        "numpy codes": lambda: env_normalize(g, ids),
        "numpy dense": lambda: env_normalize(g, ids, num_groups=args.envs),
        "numpy strings": lambda: env_normalize(g, str_ids),
        "numpy generic": generic,
    }
    try:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        tg, tids = torch.from_numpy(g), torch.from_numpy(ids)
        variants["torch codes"] = lambda: env_normalize(tg, tids)
        variants["torch dense"] = lambda: env_normalize(tg, tids, num_groups=args.envs)
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    variants["naive loop"] = lambda: naive(g, ids)

    rows = []
    for name, fn in variants.items():
        out = fn()
        err = float(np.max(np.abs(np.asarray(out) - expected)))
        med = statistics.median(timeit(fn, args.repeats))
        rows.append({"variant": name, "median_s": med, "transitions_per_s": args.n / med, "max_abs_err": err})
    naive_rate = rows[-1]["transitions_per_s"]
    for r in rows:
        r["speedup_vs_naive"] = r["transitions_per_s"] / naive_rate

    table = Table(title=f"env-level normalization: {args.n:,} transitions, {args.envs} envs, median of {args.repeats}")
    for col in ("variant", "median ms", "M transitions/s", "x naive", "max |err| vs naive"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        table.add_row(
            r["variant"],
            f"{r['median_s'] * 1e3:.1f}",
            f"{r['transitions_per_s'] / 1e6:.1f}",
            f"{r['speedup_vs_naive']:.1f}",
            f"{r['max_abs_err']:.1e}",
        )
    console = Console()
    console.print(table)
    best_numpy = rows[0]["transitions_per_s"]
    verdict = "meets" if best_numpy >= TARGET else "MISSES"
    console.print(f"numpy (int ids) {best_numpy / 1e6:.1f}M transitions/s {verdict} the 10M/s target")

    result = {
        "benchmark": "perpo_math",
        "n": args.n,
        "envs": args.envs,
        "repeats": args.repeats,
        "machine": {
            "cores": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "torch": torch_version,
        },
        "target_transitions_per_s": TARGET,
        "meets_target": best_numpy >= TARGET,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
