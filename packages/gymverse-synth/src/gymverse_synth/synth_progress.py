"""Rich progress for a synthesis run and the run-summary table."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

from gymverse.progress import JobProgress
from gymverse.text import plural
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from gymverse_synth.pipeline import RunSummary


class ProgressView:
    """Progress over seeds showing how many are running, accepted and rejected (a no-op when disabled).

    A live bar on a terminal; in a log, a plain line now and then (see `gymverse.progress.JobProgress`).
    """

    def __init__(self, total: int, *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.counts = {"running": 0, "accepted": 0, "rejected": 0, "error": 0}
        console = console or Console(file=sys.stderr)
        self._progress = JobProgress("synth", total, console=console, enabled=enabled, transient=False)

    def _text(self) -> str:
        c = self.counts
        return f"running {c['running']} · accepted {c['accepted']} · rejected {c['rejected']} · errors {c['error']}"

    def start(self, seed_id: str) -> None:
        """A seed entered the pipeline."""
        self.counts["running"] += 1
        self._progress.update(description=self._text())

    def done(self, seed_id: str, status: str, reason: str) -> None:
        """A seed finished with `status`."""
        self.counts["running"] -= 1
        self.counts[status] = self.counts.get(status, 0) + 1
        self._progress.update(advance=1, description=self._text())

    def __enter__(self) -> ProgressView:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)


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
