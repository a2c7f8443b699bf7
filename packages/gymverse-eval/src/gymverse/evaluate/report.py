"""The self-contained HTML report: tables, per-env success sparklines and a diversity map (inline SVG, no scripts).

Every metric is explained in one sentence where it is shown (`EXPLAIN`), lists and counts are written as text,
the run shows one wall time, an env that failed shows its reason instead of an empty plot, and the map labels only
points whose label collides with nothing (`report_svg`). Written in well under a second for a few hundred envs.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gymverse.evaluate.report_svg import colors, diversity_map, sparkline
from gymverse.evaluate.schema import DiversityResult, EvaluationReport

#: Near-duplicate rows shown (a corpus of template variants has thousands; the JSON keeps them all).
MAX_PAIRS_SHOWN = 200

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 8px;
vertical-align:top;text-align:left}th{background:#f3f3f3}.correct{color:#176c2c;font-weight:600}
.incorrect,.error{color:#b3261e;font-weight:600}.unverified{color:#8a6d00;font-weight:600}
.flag{display:inline-block;background:#fde7e7;border-radius:3px;padding:0 4px;margin:1px;font-size:12px}
.muted,.note{color:#666}.explain{font-size:12px;color:#444;margin:.2em 0 .2em 1em}.explain dt{font-weight:600;
float:left;clear:left;margin-right:.5em}.explain dd{margin:0 0 .15em 0}svg text{font-family:inherit}
"""

#: One sentence per metric, shown next to where the metric appears.
EXPLAIN: dict[str, str] = {
    "verdict": "correct: every check passed and the oracle solves every level; unverified: every check that can run "
    "passed but there is no oracle to prove solvability; incorrect: a check found a defect (see defects); "
    "error: the env could not be built or loaded.",
    "reference": "The policy whose success curve defines the difficulty columns (noisy oracle if the env has an "
    "oracle, else the LLM, else random play).",
    "slope": "Least-squares change in success rate per complexity level; negative means higher levels are harder.",
    "spearman": "Rank correlation (-1..1) between level and success rate; -1 means success falls at every step up.",
    "bucket": "easy when the mean success rate of the reference policy is at least 70%, medium from 30%, else hard.",
    "success by level": "Success rate of each policy at each measured level (line chart: level 1 left, 10 right; "
    "rate 0 bottom, 1 top).",
    "mean pairwise distance": "Average of 1 minus cosine similarity over all pairs of envs; 0 means all alike.",
    "Vendi score": "Effective number of distinct envs from the similarity matrix (1 = all the same, n = all "
    "different).",
    "verb_jaccard_distance": "Average Jaccard distance between the sets of action verbs two envs accept.",
    "ast_ngram_distance": "Average cosine distance between the syntax-tree node trigram profiles of two programs.",
    "similarity": "How close the two envs are by the named evidence (1 = identical).",
    "defects": "Findings that break training (crash, hang, reward outside the declared range, complexity no-op, "
    "wrong answers accepted, a constant answer wins, oracle fails, unsafe behaviour): they make the env incorrect "
    "and the exit code 1.",
    "warnings": "Quality findings (a guessable answer, a sampler that leaks the answer, a slow reset, a format "
    "penalty outside the declared range): reported, never part of the verdict.",
    "rubric": "An LLM judge's verdict on whether the program implements its spec (pass/fail; not judged: no spec).",
}
FLAGS: dict[str, str] = {
    "flat_difficulty": "Success barely changes across levels: the complexity knob has little effect.",
    "no_signal": "The reference policy never succeeds at any level, so the curve carries no information.",
    "easier_when_harder": "Success rises with the level: the knob works backwards.",
    "near_duplicate": "Structurally almost the same program as an env listed earlier (named in the notes).",
    "crash": "reset or step raised on some seeds or levels (the reason names level and seed).",
    "hang": "A reset or episode did not finish within its deadline (the reason names level and seed).",
    "degenerate_constant": "One constant answer wins far more often than random play.",
    "accepts_wrong_answers": "Two different answers both count as success on the same instance.",
    "complexity_noop": "The complexity level does not change the generated instances.",
    "complexity_noop_runtime": "Changing the level on a live env (as a trainer does) does not change instances.",
    "reward_range": "A reward fell outside the env's declared reward range.",
    "no_success_rule": "No success signal could be inferred; pass --success-rule.",
    "unsafe": "The env's code tried to read files or the environment, write outside its directory, open a socket, "
    "start a process or load native code (the attempts are listed).",
    "guessable_answer": "Warning: one constant answer wins often enough (95% lower bound) to score without solving.",
    "sampler_leaks_answer": "Warning: the env's own sample_random_action wins where no visible answer does; it "
    "draws from hidden state (not counted as degeneracy).",
    "slow_reset": "Warning: a reset took longer than the probe limit but finished before the hang bound.",
    "format_penalty_range": "Warning: the format penalty lies outside the declared reward range.",
    "incorrect": "At least one defect was found (see the defects column).",
    "error": "The env could not be loaded or built.",
}


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def plural(n: int, word: str) -> str:
    """``1 env``, ``2 envs``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def counts_text(counts: Mapping[str, int] | None) -> str:
    """``{'correct': 17, 'error': 1}`` as ``17 correct, 1 error``."""
    return ", ".join(f"{n} {k}" for k, n in (counts or {}).items()) or "none"


def list_text(values: Iterable[Any]) -> str:
    """``[1, 3, 5]`` as ``1, 3, 5``."""
    return ", ".join(str(v) for v in values) or "none"


def _explain(keys: Iterable[str], table: Mapping[str, str] = EXPLAIN) -> str:
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(table[k])}</dd>" for k in keys if k in table)
    return f'<dl class="explain">{items}</dl>' if items else ""


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    head = "".join(f'<th title="{_e(EXPLAIN.get(h, ""))}">{_e(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _flags(flags: Sequence[str]) -> str:
    return "".join(f'<span class="flag" title="{_e(FLAGS.get(f, ""))}">{_e(f)}</span>' for f in flags)


def _header(report: EvaluationReport) -> list[str]:
    run, s = report.run, report.summary
    seeds = run.get("seeds") or []
    meta = [
        plural(int(s.get("n_envs", len(report.envs))), "env"),
        f"policies {list_text(run.get('policies', []))}",
        f"levels {list_text(run.get('levels', []))}",
        f"{plural(len(seeds), 'seed')} per level and policy",
        f"executor {run.get('executor', '?')} ({plural(int(run.get('workers') or 0), 'worker')})",
    ]
    if run.get("wall_seconds") is not None:
        meta.append(f"wall time {float(run['wall_seconds']):.1f} s")
    partial = []
    if run.get("partial"):
        partial = ['<p class="incorrect" id="partial">Partial: the run was interrupted (Ctrl-C); envs whose '
                   "correctness job had not finished say so instead of a verdict.</p>"]  # fmt: skip
    return [
        *partial,
        f"<h1>GymVerse evaluation: {_e(run.get('suite', ''))}</h1>",
        f'<p class="muted">{_e(" · ".join(meta))} · schema {_e(report.schema_version)}</p>',
        f"<p>Verdicts: {_e(counts_text(s.get('verdicts')))}. Difficulty buckets: "
        f"{_e(counts_text(s.get('buckets')))}.</p>",
    ]


def _correctness(report: EvaluationReport) -> list[str]:
    # a note every env carries (e.g. the success rule of a uniform corpus) is said once, above the table
    notes = [ev.correctness.notes for ev in report.envs]
    common = [n for n in notes[0] if all(n in ns for ns in notes[1:])] if len(notes) > 1 else []
    judged = any(ev.correctness.rubric for ev in report.envs)
    rows = []
    for ev in report.envs:
        c = ev.correctness
        defects = "<br>".join(_e(r) for r in c.reasons) or '<span class="muted">none</span>'
        warnings = "<br>".join(_e(w) for w in c.warnings) or '<span class="muted">none</span>'
        own = "<br>".join(f'<span class="note">{_e(n)}</span>' for n in c.notes if n not in common)
        row = [_e(ev.name), f'<span class="{_e(c.verdict)}">{_e(c.verdict)}</span>']
        if judged:
            row.append(_e(c.rubric.get("verdict")) if c.rubric else "not judged")
        rows.append([*row, defects, warnings, own])
    headers = ["env", "verdict", *(["rubric"] if judged else []), "defects", "warnings", "notes"]
    shared = [f'<p class="note">For every env: {_e("; ".join(common))}.</p>'] if common else []
    return [
        "<h2>Correctness</h2>",
        _explain(["verdict", "defects", "warnings", *(["rubric"] if judged else [])]),
        *shared,
        _table(headers, rows, "correctness"),
    ]


def _difficulty(report: EvaluationReport) -> list[str]:
    policies = list(dict.fromkeys(p for e in report.envs for p in e.difficulty))
    pc = colors(policies)
    legend = " ".join(f'<span style="color:{pc[p]}">━ {_e(p)}</span>' for p in policies)
    rows = []
    for ev in report.envs:
        spark = sparkline(ev, pc)
        if not spark:  # a failed env gets its reason, never an empty plot
            why = ev.correctness.reasons[0] if ev.correctness.reasons else "no level was measured"
            spark = f'<span class="muted">not measured: {_e(why)}</span>'
        rates = []
        for p, pd in ev.difficulty.items():
            pts = ", ".join(f"L{lv.level} {lv.rate:.0%}" for lv in pd.levels) or _e(pd.error or "–")
            rates.append(f"<b>{_e(p)}</b> {pts}")
        rows.append(
            [_e(ev.name), _e(ev.reference_policy or "–"), _fmt(ev.slope), _fmt(ev.spearman), _e(ev.bucket or "–"),
             _flags(ev.flags), spark + ("<br>" + "<br>".join(rates) if rates else "")]
        )  # fmt: skip
    shown_flags = list(dict.fromkeys(f for e in report.envs for f in e.flags))
    return [
        "<h2>Difficulty: success vs complexity</h2>",
        f"<p>{legend}</p>" if legend else "",
        _explain(["reference", "slope", "spearman", "bucket", "success by level"]),
        _explain(shown_flags, FLAGS),
        _table(["env", "reference", "slope", "spearman", "bucket", "flags", "success by level"], rows),
    ]


def _diversity(div: DiversityResult) -> list[str]:
    parts = ["<h2>Diversity</h2>"]
    rows = [
        [_e(f"{k} embeddings"), _fmt(v.get("mean_cosine_distance")), f"{_fmt(v.get('vendi'), 2)} of {div.n}"]
        for k, v in div.embedding.items()
    ]
    rows += [[_e(k), _fmt(v), "–"] for k, v in div.structural.items()]
    parts.append(_explain(["mean pairwise distance", "Vendi score", *div.structural]))
    parts.append(_table(["measure", "mean pairwise distance", "Vendi score"], rows))
    if div.error:
        parts.append(f'<p class="error">{_e(div.error)}</p>')
    svg = diversity_map(div)
    if svg:
        parts.append(
            f'<p class="explain">Map: each point is an env, placed by the first two principal components of its '
            f"description and program embeddings ({_e(div.embedder)}); nearby points are similar. Names are shown "
            f"where they fit without overlapping; hover a point for its name.</p>{svg}"
        )
    shown = div.near_duplicates[:MAX_PAIRS_SHOWN]
    pairs = [[_e(d["b"]), _e(d["a"]), _e(d["kind"]), _fmt(d["similarity"])] for d in shown]
    parts.append(f"<h3>Near-duplicate pairs (similarity above {div.threshold:g})</h3>")
    parts.append(
        _explain(["similarity"]) + _table(["env (listed later)", "twin (listed first)", "by", "similarity"], pairs)
        if pairs
        else "<p>none</p>"
    )
    rest = len(div.near_duplicates) - len(shown)
    if rest > 0:
        parts.append(f'<p class="muted">{plural(rest, "more pair")} in evaluation.json (most similar shown).</p>')
    return parts


def render_html(report: EvaluationReport) -> str:
    """The whole report as one HTML string (no external resources, no scripts)."""
    parts = _header(report) + _correctness(report) + _difficulty(report)
    if report.diversity is not None:
        parts += _diversity(report.diversity)
    body = "\n".join(p for p in parts if p)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>GymVerse evaluation</title>'
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def write_report(report: EvaluationReport, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``evaluation.json``, ``report.html`` and ``manifest.json`` (the envs that passed, for training:
    `gymverse.manifest`) into `out_dir`; returns the first two paths."""
    from gymverse.manifest import MANIFEST_NAME, write_manifest

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = report.save(out / "evaluation.json")
    rows = [{"name": e.name, "ref": e.ref, "verdict": e.correctness.verdict, "flags": e.flags,
             "warnings": [f["code"] for f in e.correctness.findings if f.get("severity") == "warning"]}
            for e in report.envs]  # fmt: skip
    write_manifest(out / MANIFEST_NAME, str(report.run.get("suite", "")), rows)
    html_path = out / "report.html"
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path


__all__ = ["EXPLAIN", "FLAGS", "counts_text", "list_text", "plural", "render_html", "write_report"]
