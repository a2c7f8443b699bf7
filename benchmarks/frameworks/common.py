"""Shared plumbing of the cross-framework benchmarks: machine, interleaved rounds, medians, tables, JSON.

Every script in this folder imports this module (it sits next to them, so it is importable from each framework's
own virtual environment without installing anything) and writes one JSON file per benchmark into
``benchmarks/results/frameworks/`` with the schema ``run_all.py`` reads:

    {"benchmark": str, "title": str, "machine": {...}, "args": {...},
     "rows": [{"framework": str, "case": str, "arm": str, <metric>: float, "<metric>_rounds": [...], ...}],
     "plot": {"metric": str, "label": str, "lower_is_better": bool},
     "targets": [{"name": str, "value": float, "limit": float, "unit": str, "met": bool, "note": str}]}

Timings are medians over interleaved rounds (arm A, arm B, arm A, ... in a rotating order), because the machines
these run on are shared and a single run is noise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results" / "frameworks"


@dataclass(frozen=True)
class Target:
    """One stated target and whether this run met it."""

    name: str
    value: float
    limit: float
    unit: str
    met: bool
    note: str = ""


def base_parser(description: str) -> argparse.ArgumentParser:
    """The flags every framework benchmark takes (``--quick``, ``--gpu``, ``--rounds``, ``--out``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes and 3 rounds: a smoke run in seconds")
    parser.add_argument("--gpu", action="store_true", help="also measure a real model's generation on the GPU")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5, 3 with --quick)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON result")
    return parser


def rounds_of(args: argparse.Namespace) -> int:
    """The number of interleaved rounds the flags ask for (never fewer than 3, 5 unless --quick)."""
    if args.rounds is not None:
        return max(int(args.rounds), 1)
    return 3 if args.quick else 5


def versions(*packages: str) -> dict[str, str]:
    """Installed versions of the named distributions (``"absent"`` where one is not installed)."""
    out: dict[str, str] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def machine(*packages: str) -> dict[str, Any]:
    """What the numbers were taken on: CPU, Python, load, GPU if torch sees one, and the named package versions."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "executable": sys.executable,
        "load_avg_1m": os.getloadavg()[0],
        "versions": versions("gymverse-core", *packages),
    }
    try:
        import torch

        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


def progress(message: str) -> None:
    """One progress line on stderr, flushed (also when stderr is not a terminal)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def interleaved(
    arms: Mapping[str, Callable[[], Mapping[str, float]]], rounds: int, label: str = ""
) -> dict[str, dict[str, Any]]:
    """Run every arm once per round in a rotating order; return each arm's per-metric medians and raw rounds."""
    names = list(arms)
    samples: dict[str, list[Mapping[str, float]]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            samples[name].append(arms[name]())
        progress(f"{label} round {r + 1}/{rounds} done")
    return {name: medians(samples[name]) for name in names}


def medians(samples: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """The median of each numeric metric over rounds, with the rounds kept under ``<metric>_rounds``."""
    out: dict[str, Any] = {}
    for key in samples[0]:
        values = [float(s[key]) for s in samples]
        out[key] = statistics.median(values)
        out[f"{key}_rounds"] = [round(v, 6) for v in values]
    return out


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, ``inf`` when the denominator is zero."""
    return numerator / denominator if denominator else float("inf")


def print_table(title: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    """A plain aligned table on stdout (rich is not installed in every framework's environment)."""
    cells = [[_fmt(row.get(col, "")) for col in columns] for row in rows]
    widths = [max(len(col), *(len(c[i]) for c in cells)) if cells else len(col) for i, col in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(col.ljust(w) for col, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def write_result(
    name: str,
    title: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    args: argparse.Namespace,
    plot_metric: str,
    plot_label: str,
    lower_is_better: bool,
    targets: Sequence[Target] = (),
    packages: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``<out>/<name>.json`` in the schema ``run_all.py`` reads and return its path."""
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "title": title,
        "machine": machine(*packages),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "rows": list(rows),
        "plot": {"metric": plot_metric, "label": plot_label, "lower_is_better": lower_is_better},
        "targets": [asdict(t) for t in targets],
        **(dict(extra) if extra else {}),
    }
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {path}")
    return path
