"""Plots of a run: success and complexity over steps per env (``training.png``) and ``summary.html``.

Level changes (evolution events) are marked with vertical lines. Needs matplotlib (``gymverse-train[plots]``);
without it the HTML summary is still written, with a note instead of the figure.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PNG = "training.png"
HTML = "summary.html"


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The per-step records of ``metrics.jsonl`` (a run directory or the file)."""
    p = Path(path)
    p = p / "metrics.jsonl" if p.is_dir() else p
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def _smooth(values: Sequence[float], window: int = 5) -> list[float]:
    """Centered moving mean (shorter at the ends): a trailing mean would draw every change `window // 2` steps late."""
    half = window // 2
    out = []
    for i in range(len(values)):
        part = [v for v in values[max(0, i - half) : i + half + 1] if v == v]  # NaN: the env had no episode then
        out.append(sum(part) / len(part) if part else float("nan"))
    return out


def _level_axis(ax: Any, levels: Sequence[float]) -> None:
    """Whole levels only, with room around them (a constant level 1 must not fill a 0.96..1.04 axis)."""
    from matplotlib.ticker import MaxNLocator

    seen = [v for v in levels if v == v]
    lo, hi = (min(seen), max(seen)) if seen else (1, 10)
    ax.set_ylim(max(0.5, lo - 1.5), max(hi + 1.5, lo + 3.5))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def plot(metrics: Sequence[dict[str, Any]], path: str | Path, title: str = "gymverse train") -> bool:
    """Write the two-panel figure; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    envs = sorted({e for m in metrics for e in m["success_by_env"]})
    steps = [m["step"] for m in metrics]
    fig, (ax_s, ax_c) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for env in envs:
        ys = [m["success_by_env"].get(env, float("nan")) for m in metrics]
        (line,) = ax_s.plot(steps, _smooth(ys), label=f"{env} (centered 5-step mean)")
        ax_s.plot(steps, ys, color=line.get_color(), alpha=0.25, linewidth=0.8)
        ax_c.step(steps, [m["complexity_by_env"].get(env, float("nan")) for m in metrics], where="post", label=env)
    for m in metrics:
        for c in m.get("level_changes", []):
            for ax in (ax_s, ax_c):
                ax.axvline(m["step"], color="red" if c["reason"] == "promote" else "gray", linestyle=":", alpha=0.7)
            ax_c.annotate(f"{c['old_level']}→{c['new_level']}", (m["step"], c["new_level"]), fontsize=7)
    ax_s.set_ylabel("success rate")
    ax_s.set_ylim(-0.02, 1.02)
    ax_s.legend(fontsize=8, loc="upper left")
    _level_axis(ax_c, [v for m in metrics for v in m["complexity_by_env"].values()])
    ax_c.set_ylabel("complexity level")
    ax_c.set_xlabel("training step")
    ax_s.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _table(metrics: Sequence[dict[str, Any]]) -> str:
    cols = ["step", "success", "return", "adv_std", "tokens_per_s", "step_s", "peak_rss_mb"]
    head = "".join(f"<th>{c}</th>" for c in [*cols, "levels", "events"])
    rows = []
    for m in metrics:
        cells = "".join(f"<td>{m.get(c, 0):.3g}</td>" for c in cols)
        levels = html.escape(" ".join(f"{e}={v}" for e, v in m.get("levels", {}).items()))
        events = html.escape("; ".join(f"{c['env_id']} {c['old_level']}→{c['new_level']}" for c in m["level_changes"]))
        rows.append(f"<tr>{cells}<td>{levels}</td><td>{events}</td></tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def write_report(run_dir: str | Path) -> list[Path]:
    """Write ``training.png`` and ``summary.html`` into `run_dir` from its ``metrics.jsonl``; returns the paths."""
    out = Path(run_dir)
    metrics = read_metrics(out)
    if not metrics:
        return []
    written = []
    png = out / PNG
    figure = "<p>(install matplotlib for the plot: gymverse-train[plots])</p>"
    if plot(metrics, png, title=f"gymverse train: {out.name}"):
        written.append(png)
        data = base64.b64encode(png.read_bytes()).decode()
        figure = f'<img alt="success and complexity" src="data:image/png;base64,{data}">'
    config = ""
    state = out / "checkpoint" / "state.json"
    if state.is_file():
        config = html.escape(json.dumps(json.loads(state.read_text())["config"], indent=1))
    page = (
        f"<!doctype html><meta charset=utf-8><title>gymverse train {html.escape(out.name)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style>"
        f"<h1>gymverse train: {html.escape(out.name)}</h1>{figure}<h2>Steps</h2>{_table(metrics)}"
        f"<h2>Config</h2><pre>{config}</pre>"
    )
    (out / HTML).write_text(page, encoding="utf-8")
    written.append(out / HTML)
    return written
