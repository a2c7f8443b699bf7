"""What ``gymverse evaluate`` prints and returns: the verdict table with each failure's first reason, the exit code.

Exit codes follow linters and test runners: 0 when every env is ``correct`` (or ``unverified``: it runs, but no
oracle exists to prove it solvable, or the correctness pass was skipped), 1 when any env is ``incorrect`` or
``error`` (decided by defects only: warnings never change it), 2 on usage errors (decided before any env runs), 130
when Ctrl-C stopped the run (what was done is written, marked partial).
"""

from __future__ import annotations

from typing import Any

from gymverse.evaluate.schema import EnvEvaluation, EvaluationReport

PASSING_VERDICTS = ("correct", "unverified")
#: Flags about difficulty and the suite, not defects of the env: shown with the warnings.
QUALITY_FLAGS = ("flat_difficulty", "no_signal", "easier_when_harder", "near_duplicate", "no_difficulty",
                 "diversity_error")  # fmt: skip
LEGEND = (
    "bucket: easy/medium/hard by the reference policy's mean success (>= 70% / >= 30% / below); slope: change in "
    "success per level (negative: higher levels are harder); spearman: rank correlation of success with level "
    "(-1: falls at every step); defects decide the verdict and the exit code, warnings do not."
)
_STYLE = {"correct": "green", "incorrect": "red", "error": "red", "unverified": "yellow"}


def exit_code(report: EvaluationReport) -> int:
    """0 when every env passes (``correct``/``unverified``), else 1."""
    return 0 if all(ev.correctness.verdict in PASSING_VERDICTS for ev in report.envs) else 1


def first_reason(ev: EnvEvaluation, width: int = 160) -> str:
    """One line saying why `ev` is not correct (or has no difficulty); empty for a clean env."""
    reasons = list(ev.correctness.reasons) if ev.correctness.verdict != "correct" else []
    if ev.bucket is None:
        reasons += [pd.error for pd in ev.difficulty.values() if pd.error]
    if not reasons:
        return ""
    line = " ".join(reasons[0].split())
    return line if len(line) <= width else line[: width - 1] + "…"


def bucket_cell(ev: EnvEvaluation) -> str:
    """The bucket, or why there is none: an env that never ran has no difficulty (not "hard")."""
    if ev.bucket is not None:
        return ev.bucket
    return "none" if ev.correctness.verdict == "error" or ev.difficulty else "-"


def print_summary(report: EvaluationReport, console: Any) -> None:
    """The per-env table, then one line per env that is not correct (or has no difficulty) with its first reason."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"gymverse evaluate: {report.run['suite']}")
    for col in ("env", "verdict", "bucket", "slope", "spearman", "defects", "warnings"):
        table.add_column(col, overflow="fold")
    for ev in report.envs:
        v = ev.correctness.verdict
        warned = {f["code"] for f in ev.correctness.findings if f.get("severity") == "warning"}
        table.add_row(
            escape(ev.name),
            f"[{_STYLE.get(v, '')}]{v}[/]",
            bucket_cell(ev),
            "-" if ev.slope is None else f"{ev.slope:+.3f}",
            "-" if ev.spearman is None else f"{ev.spearman:+.2f}",
            ", ".join(f for f in ev.flags if f not in warned and f not in QUALITY_FLAGS),
            f"[yellow]{', '.join(f for f in ev.flags if f in warned or f in QUALITY_FLAGS)}[/]",
        )
    console.print(table)
    console.print(LEGEND, soft_wrap=True)
    for ev in report.envs:
        why = first_reason(ev)
        if why:
            v = ev.correctness.verdict
            line = f"{escape(ev.name)} [{_STYLE.get(v, '')}]{v}[/]: {escape(why)}"
            console.print(line, soft_wrap=True)
        for w in ev.correctness.warnings[:2]:
            console.print(f"{escape(ev.name)} [yellow]warning[/]: {escape(' '.join(w.split())[:160])}", soft_wrap=True)
    verdicts = report.summary.get("verdicts") or {}
    failing = sum(n for v, n in verdicts.items() if v not in PASSING_VERDICTS)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
    console.print(f"verdicts: {counts}" + (f" ({failing} failing)" if failing else ""))


__all__ = ["PASSING_VERDICTS", "bucket_cell", "exit_code", "first_reason", "print_summary"]
