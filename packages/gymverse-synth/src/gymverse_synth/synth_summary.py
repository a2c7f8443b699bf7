"""The run summary of a synthesis run as a rich table, and one line per seed that was not accepted."""

from __future__ import annotations

import re

from gymverse.text import plural
from rich.table import Table

from gymverse_synth.pipeline import RunSummary


def _one_line(text: str, width: int = 160) -> str:
    line = " ".join(text.split())
    line = re.sub(r"^attempt \d+: ", "", line)  # the stage's own bookkeeping, not the cause
    return line if len(line) <= width else line[: width - 1] + "…"


def failure_lines(summary: RunSummary) -> list[str]:
    """One line per seed that was not accepted, with its first reason (the cause, where people look)."""
    return [
        f"{o.seed_id}: {o.status} at {o.stage}: {_one_line(o.reason or 'no reason given')}"
        for o in summary.outcomes
        if o.status != "accepted"
    ]


def summary_table(summary: RunSummary) -> Table:
    """The run summary as a rich table: totals, rejections by reason, repair rounds, tokens, time."""
    table = Table(title=f"synthesis run ({summary.model})", show_header=True)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("seeds", str(summary.seeds))
    table.add_row("accepted", str(summary.accepted))
    table.add_row("rejected", str(summary.rejected))
    table.add_row("errors (rerun resumes them)", str(summary.errors))
    for reason, n in summary.rejected_by_reason.items():
        table.add_row(f"  not accepted: {reason}", str(n))
    for rounds, n in summary.repair_rounds.items():
        table.add_row(f"  seeds with {plural(int(rounds), 'repair round')}", str(n))
    table.add_row("prompt / completion tokens", f"{summary.prompt_tokens} / {summary.completion_tokens}")
    table.add_row("seconds", f"{summary.seconds:.1f}")
    return table
