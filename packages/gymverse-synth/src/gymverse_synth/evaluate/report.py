"""The self-contained HTML report: inline SVG plots (matplotlib), correctness/difficulty/diversity tables."""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gymverse_synth.evaluate.schema import DiversityResult, EvaluationReport

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 8px;
vertical-align:top;text-align:left}th{background:#f3f3f3}.correct{color:#176c2c;font-weight:600}
.incorrect,.error{color:#b3261e;font-weight:600}.unverified{color:#8a6d00;font-weight:600}
.flag{display:inline-block;background:#fde7e7;border-radius:3px;padding:0 4px;margin:1px;font-size:12px}
.plot svg{max-width:100%;height:auto}code{font-size:12px}.muted{color:#777}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)  # RDF boilerplate, not content
    return text[text.index("<svg") :]  # drop the XML prolog/doctype so it can sit inside HTML


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "gymverse"  # stable element ids: same data, same bytes
    import matplotlib.pyplot as plt

    return plt


def success_curves_svg(report: EvaluationReport) -> str:
    """Small multiples: success rate vs complexity level, one panel per env, one line per policy."""
    plt = _pyplot()
    envs = [e for e in report.envs if e.difficulty]
    if not envs:
        return ""
    cols = min(4, len(envs))
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False, sharey=True)
    policies = list(dict.fromkeys(p for e in envs for p in e.difficulty))
    colors = {p: f"C{i}" for i, p in enumerate(policies)}
    for ax, ev in zip(axes.flat, envs):
        for policy, pd in ev.difficulty.items():
            if pd.levels:
                xs = [lv.level for lv in pd.levels]
                ax.plot(xs, [lv.rate for lv in pd.levels], marker="o", ms=3, label=policy, color=colors[policy])
        ax.set_title(ev.name, fontsize=8)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(0.5, 10.5)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(envs) :]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=colors[p], marker="o", label=p) for p in policies]
    fig.legend(handles=handles, loc="upper center", ncol=len(policies), fontsize=8, bbox_to_anchor=(0.5, 1.02))
    fig.supxlabel("complexity level", fontsize=9)
    fig.supylabel("success rate", fontsize=9)
    fig.tight_layout()
    return _svg(fig)


def diversity_map_svg(div: DiversityResult) -> str:
    """Scatter of the 2-D PCA map, coloured by domain, labelled by env."""
    if not div.map:
        return ""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    domains = sorted({str(p["domain"]) for p in div.map})
    for i, domain in enumerate(domains):
        pts = [p for p in div.map if p["domain"] == domain]
        ax.scatter([p["x"] for p in pts], [p["y"] for p in pts], label=domain, color=f"C{i}", s=36)
        for p in pts:
            ax.annotate(str(p["name"]).split(":")[-1], (p["x"], p["y"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")  # fmt: skip
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(f"diversity map ({div.embedder}, PCA)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _flags(flags: Sequence[str]) -> str:
    return "".join(f'<span class="flag">{_e(f)}</span>' for f in flags)


def _plot(render: Any, *args: Any) -> str:
    try:
        return f'<div class="plot">{render(*args)}</div>'
    except ImportError:
        return '<p class="muted">(plots need matplotlib: install gymverse-synth[eval])</p>'


def render_html(report: EvaluationReport) -> str:
    """The whole report as one HTML string (no external resources)."""
    run, parts = report.run, []
    parts.append(f"<h1>GymVerse evaluation: {_e(run.get('suite', ''))}</h1>")
    meta = ", ".join(
        f"{k}={_e(run.get(k))}" for k in ("policies", "levels", "seeds", "executor", "workers", "wall_seconds")
    )
    parts.append(f'<p class="muted">schema {report.schema_version}; {meta}</p>')
    s = report.summary
    parts.append(f"<p>{s.get('n_envs', 0)} envs; verdicts {_e(s.get('verdicts'))}; buckets {_e(s.get('buckets'))}</p>")

    parts.append("<h2>Correctness</h2>")
    rows = []
    for ev in report.envs:
        c = ev.correctness
        reasons = "<br>".join(_e(r) for r in c.reasons) or '<span class="muted">all checks passed</span>'
        rubric = _e(c.rubric.get("verdict")) if c.rubric else "–"
        rows.append([_e(ev.name), f'<span class="{_e(c.verdict)}">{_e(c.verdict)}</span>', rubric, reasons])
    parts.append(_table(["env", "verdict", "rubric", "reasons"], rows, "correctness"))

    parts.append("<h2>Difficulty: success vs complexity</h2>")
    parts.append(_plot(success_curves_svg, report))
    policies = list(dict.fromkeys(p for e in report.envs for p in e.difficulty))
    rows = []
    for ev in report.envs:
        curves = []
        for p in policies:
            pd = ev.difficulty.get(p)
            if pd is not None:
                pts = " ".join(f"L{lv.level}:{lv.rate:.2f}" for lv in pd.levels) or _e(pd.error or "–")
                curves.append(f"<b>{_e(p)}</b> {pts}")
        rows.append(
            [_e(ev.name), _e(ev.reference_policy or "–"), _fmt(ev.slope), _fmt(ev.spearman), _e(ev.bucket or "–"),
             _flags(ev.flags), "<br>".join(curves)]
        )  # fmt: skip
    parts.append(_table(["env", "reference", "slope", "spearman", "bucket", "flags", "success by level"], rows))

    div = report.diversity
    if div is not None:
        parts.append("<h2>Diversity</h2>")
        emb = div.embedding
        rows = [
            [_e(k), _fmt(v.get("mean_cosine_distance")), _fmt(v.get("vendi"), 2) + f" / {div.n}"]
            for k, v in emb.items()
        ]
        rows += [[_e(k), _fmt(v), ""] for k, v in div.structural.items()]
        parts.append(_table(["measure", "mean pairwise distance", "Vendi score"], rows))
        if div.error:
            parts.append(f'<p class="error">{_e(div.error)}</p>')
        parts.append(_plot(diversity_map_svg, div))
        dup_rows = [[_e(d["a"]), _e(d["b"]), _e(d["kind"]), _fmt(d["similarity"])] for d in div.near_duplicates]
        parts.append(f"<h3>Near-duplicate pairs (similarity &gt; {div.threshold})</h3>")
        parts.append(_table(["a", "b", "by", "similarity"], dup_rows) if dup_rows else "<p>none</p>")
    body = "\n".join(parts)
    return f'<!doctype html>\n<html><head><meta charset="utf-8"><title>GymVerse evaluation</title>' \
           f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"  # fmt: skip


def write_report(report: EvaluationReport, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``evaluation.json`` and ``report.html`` into `out_dir`; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = report.save(out / "evaluation.json")
    html_path = out / "report.html"
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path


__all__ = ["diversity_map_svg", "render_html", "success_curves_svg", "write_report"]
