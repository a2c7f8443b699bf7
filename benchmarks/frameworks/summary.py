"""``SUMMARY.md`` and bar charts from the JSON results of the framework benchmarks (the schema in `common`).

One section per result file: its machine, a plot, a table of medians with ratio columns, and its targets; before
them a table of the runs (when `run_all` passes them) and of every target, missed ones first; after them a GPU
section and the machines. Ratio columns are the rows' own ``"vs <arm>"`` keys plus, when the file names a
``baseline`` arm, each row against the baseline arm of the same case: the median of the per-round ratios when
both rows carry their rounds, else the ratio of the medians.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import _fmt

SUMMARY = "SUMMARY.md"


@dataclass(frozen=True)
class RunRecord:
    """How one benchmark script fared in `run_all` (status: ``ok``, ``failed (exit N)`` or ``not run: ...``)."""

    script: str
    venv: str
    status: str
    seconds: float | None = None


def load_results(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``*.json`` in `folder` that has the result schema, sorted by name (others are skipped, not fatal)."""
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "benchmark" in doc:
            out.append((path, doc))
    return out


def baseline_of(doc: Mapping[str, Any]) -> str | None:
    """The arm ratios are taken against: top-level ``baseline`` or ``plot.baseline``."""
    value = doc.get("baseline") or (doc.get("plot") or {}).get("baseline")
    return str(value) if value else None


def paired_ratio(row: Mapping[str, Any], ref: Mapping[str, Any], metric: str) -> float | None:
    """row / ref on `metric`: the median of per-round ratios when both have equally many rounds, else of medians."""
    a, b = row.get(f"{metric}_rounds"), ref.get(f"{metric}_rounds")
    if isinstance(a, list) and isinstance(b, list) and a and len(a) == len(b) and all(b):
        return float(statistics.median(x / y for x, y in zip(a, b)))
    num, den = row.get(metric), ref.get(metric)
    if not isinstance(num, int | float) or not isinstance(den, int | float) or not den:
        return None
    return float(num) / float(den)


def with_ratios(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows with a ``vs <baseline>`` ratio on the plot metric added (rows that have one keep theirs)."""
    rows = [dict(r) for r in doc["rows"]]
    base, metric = baseline_of(doc), (doc.get("plot") or {}).get("metric")
    if base is None or metric is None:
        return rows
    for row in rows:
        key = f"vs {base}"
        if key in row or row.get("arm") == base:
            continue
        same_case = [r for r in rows if r.get("case") == row.get("case") and r.get("arm") == base]
        ref = next((r for r in same_case if r.get("framework") == row.get("framework")), None) or next(
            iter(same_case), None
        )
        if ref is not None and (value := paired_ratio(row, ref, metric)) is not None:
            row[key] = value
    return rows


def metric_columns(rows: Sequence[Mapping[str, Any]], plot_metric: str | None) -> tuple[list[str], list[str]]:
    """(metric columns, plot metric first; ratio columns) in order of first appearance."""
    metrics: list[str] = [plot_metric] if plot_metric else []
    ratios: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key in ("framework", "case", "arm") or key.endswith("_rounds"):
                continue
            target = ratios if is_ratio(key) and key != plot_metric else metrics
            if key not in target and (target is ratios or isinstance(value, int | float | str)):
                target.append(key)
    return metrics, ratios


def is_ratio(key: str) -> bool:
    """A ratio column: ``vs <arm>`` or a name with ``ratio`` in it (``ratio_vs_native``)."""
    return key.startswith("vs ") or "ratio" in key


def _cell(value: Any, ratio: bool = False) -> str:
    if value is None or value == "":
        return "–"
    if ratio and isinstance(value, int | float):
        return f"{value:.2f}x"
    return _fmt(value).replace("|", "\\|")


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines


def rows_table(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], ratios: Sequence[str]) -> list[str]:
    """Result rows as a Markdown table: framework, case, arm, the metrics, the ratios (as ``1.25x``)."""
    body = [
        [_cell(r.get("framework")), _cell(r.get("case")), _cell(r.get("arm"))]
        + [_cell(r.get(m)) for m in metrics]
        + [_cell(r.get(k), ratio=True) for k in ratios]
        for r in rows
    ]
    return markdown_table(["framework", "case", "arm", *metrics, *ratios], body)


def machine_line(m: Mapping[str, Any]) -> str:
    """CPU, CPU count, GPU, Python and load average of a result's ``machine`` record."""
    gpu = m.get("gpu") or "no GPU"
    load = m.get("load_avg_1m")
    load_text = f", load {load:.1f}" if isinstance(load, int | float) else ""
    return f"{m.get('processor', '?')}, {m.get('cpus', '?')} CPUs, {gpu}, Python {m.get('python', '?')}{load_text}"


def _versions(m: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in (m.get("versions") or {}).items())


def is_gpu_row(doc: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """A row measured on a GPU: ``device`` says so, its arm or case names the GPU, or its benchmark's name does."""
    device = str(row.get("device", "")).lower()
    text = f"{row.get('arm', '')} {row.get('case', '')} {doc.get('benchmark', '')}".lower()
    return device.startswith(("cuda", "gpu")) or "gpu" in text


def plot(doc: Mapping[str, Any], path: Path) -> Path | None:
    """A grouped bar chart of the plot metric: one group per case, one bar per framework/arm."""
    meta = doc.get("plot") or {}
    metric = meta.get("metric")
    rows = [r for r in doc["rows"] if isinstance(r.get(metric), int | float)]
    if not metric or not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def name(r: Mapping[str, Any]) -> str:
        return f"{r.get('framework', '')}: {r.get('arm', '')}"

    cases = list(dict.fromkeys(str(r.get("case", "")) for r in rows))
    series = list(dict.fromkeys(name(r) for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    by_case = {c: [r for r in rows if str(r.get("case", "")) == c] for c in cases}
    width = 0.8 / max(len(v) for v in by_case.values())
    fig, ax = plt.subplots(figsize=(min(18.0, max(6.0, 0.35 * len(rows) + 3)), 4.8))
    labelled: set[str] = set()
    for i, case in enumerate(cases):
        present = by_case[case]
        for k, r in enumerate(present):
            s = name(r)
            x = i - width * len(present) / 2 + width * (k + 0.5)
            label = s if s not in labelled else None
            labelled.add(s)
            ax.bar(x, float(r[metric]), width, color=colors[series.index(s) % len(colors)], label=label)
    positive = [float(r[metric]) for r in rows if float(r[metric]) > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    ax.set_xticks(range(len(cases)), cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(str(meta.get("label", metric)))
    ax.set_title(str(doc.get("title", doc.get("benchmark", "")))[:100], fontsize=10)
    ax.legend(fontsize=7, ncol=min(4, len(series)), loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _section(path: Path, doc: Mapping[str, Any], png: Path | None, fresh: bool) -> list[str]:
    machine = doc.get("machine") or {}
    args = doc.get("args") or {}
    rows = with_ratios(doc)
    meta = doc.get("plot") or {}
    metrics, ratios = metric_columns(rows, meta.get("metric"))
    when = (
        "this run"
        if fresh
        else f"an earlier run ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(path.stat().st_mtime))})"
    )
    mode = "--quick" if args.get("quick") else "full"
    out = [f"## {doc.get('title', doc['benchmark'])}", ""]
    out.append(
        f"`{path.name}` from {when}, {mode} mode, {args.get('rounds') or ('3' if args.get('quick') else '5')}"
        f" interleaved rounds (medians). Machine: {machine_line(machine)}."
    )
    if versions := _versions(machine):
        out.append(f"Versions: {versions}.")
    if base := baseline_of(doc):
        out.append(f"Ratios: {meta.get('metric')} against `{base}` in the same case (median of per-round ratios).")
    out.append("")
    if png is not None:
        out += [f"![{doc['benchmark']}]({png.name})", ""]
    out += rows_table(rows, metrics, ratios)
    if doc.get("targets"):
        out += ["", "Targets:", ""]
        for t in doc["targets"]:
            out.append(
                f"- {'met' if t.get('met') else '**MISSED**'}: {t.get('name')}: {_fmt(t.get('value'))} "
                f"({t.get('unit', '')} {_fmt(t.get('limit'))}){' — ' + t['note'] if t.get('note') else ''}"
            )
    out.append("")
    return out


def write_summary(
    folder: Path,
    runs: Sequence[RunRecord] = (),
    *,
    gpu_requested: bool = False,
    since: float | None = None,
    command: str = "benchmarks/run_all.py",
) -> Path:
    """Write `folder`/SUMMARY.md and one ``<benchmark>.png`` per result file; returns the Markdown's path.

    Files modified before `since` (a ``time.time()``) are marked as from an earlier run.
    """
    results = load_results(folder)
    lines = ["# GymVerse across frameworks: benchmark summary", ""]
    lines.append(
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}` from "
        f"{len(results)} result file(s) in `{folder.name}/`. Timings are medians over interleaved rounds; "
        "ratios compare arms measured side by side in the same run."
    )
    lines.append("")
    if runs:
        lines += ["## Runs", ""]
        lines += markdown_table(
            ["script", "venv", "status", "seconds"],
            [[r.script, f"`{r.venv}`", r.status, _cell(r.seconds)] for r in runs],
        )
        lines.append("")
    targets = [(doc, t) for _, doc in results for t in doc.get("targets") or []]
    lines += ["## Targets", ""]
    if targets:
        targets.sort(key=lambda dt: bool(dt[1].get("met")))
        lines += markdown_table(
            ["benchmark", "target", "value", "limit", "status", "note"],
            [
                [
                    str(doc["benchmark"]),
                    str(t.get("name")),
                    _cell(t.get("value")),
                    f"{t.get('unit', '')} {_fmt(t.get('limit'))}",
                    "met" if t.get("met") else "**MISSED**",
                    str(t.get("note", "")).replace("|", "\\|"),
                ]
                for doc, t in targets
            ],
        )
    else:
        lines.append("No result file states a target.")
    lines.append("")
    for path, doc in results:
        png = plot(doc, folder / f"{doc['benchmark']}.png")
        fresh = since is None or path.stat().st_mtime >= since
        lines += _section(path, doc, png, fresh)
    lines += _gpu_section(results, gpu_requested)
    lines += ["## Machines", ""]
    machines: dict[str, list[str]] = {}
    for _, doc in results:
        m = doc.get("machine") or {}
        key = f"{m.get('platform', '?')}; {machine_line(m)}"
        machines.setdefault(key, []).append(str(doc["benchmark"]))
    for key, names in machines.items():
        lines.append(f"- {key}: {', '.join(names)}")
    if not machines:
        lines.append("No results.")
    lines.append("")
    out = folder / SUMMARY
    out.write_text("\n".join(lines))
    return out


def _gpu_section(results: Sequence[tuple[Path, Mapping[str, Any]]], gpu_requested: bool) -> list[str]:
    lines = ["## GPU", ""]
    on_gpu = [(p, d) for p, d in results if (d.get("machine") or {}).get("gpu")]
    if not on_gpu:
        lines.append(
            "No GPU on this machine: every number above was taken on the CPU"
            + (" (`--gpu` was passed; the GPU measurements need a CUDA device)." if gpu_requested else ".")
        )
    for path, doc in on_gpu:
        gpu_rows = [r for r in doc["rows"] if is_gpu_row(doc, r)]
        lines.append(f"- `{path.name}` on {doc['machine']['gpu']}: {len(gpu_rows)} GPU row(s)")
        if gpu_rows:
            lines += ["", *rows_table(gpu_rows, *metric_columns(gpu_rows, (doc.get("plot") or {}).get("metric"))), ""]
    notes = [(p, d["gpu"]) for p, d in results if isinstance(d.get("gpu"), str)]
    if notes:
        lines += ["", *(f"- `{p.name}`: GPU {status}" for p, status in notes)]
    return [*lines, ""]
