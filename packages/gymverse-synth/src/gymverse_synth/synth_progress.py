"""Rich progress for a synthesis run and the run-summary table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from gymverse_synth.pipeline import RunSummary


class ProgressView:
    """A progress bar over seeds showing how many are running, accepted and rejected (a no-op when disabled)."""

    def __init__(self, total: int, *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.counts = {"running": 0, "accepted": 0, "rejected": 0, "error": 0}
        self._progress = Progress(
            TextColumn("[bold]synth"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
        )
        self._task = self._progress.add_task(self._text(), total=total)

    def _text(self) -> str:
        c = self.counts
        return f"running {c['running']} · accepted {c['accepted']} · rejected {c['rejected']} · errors {c['error']}"

    def start(self, seed_id: str) -> None:
        """A seed entered the pipeline."""
        self.counts["running"] += 1
        self._progress.update(self._task, description=self._text())

    def done(self, seed_id: str, status: str, reason: str) -> None:
        """A seed finished with `status`."""
        self.counts["running"] -= 1
        self.counts[status] = self.counts.get(status, 0) + 1
        self._progress.update(self._task, advance=1, description=self._text())

    def __enter__(self) -> ProgressView:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)


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
        table.add_row(f"  seeds with {rounds} repair round(s)", str(n))
    table.add_row("prompt / completion tokens", f"{summary.prompt_tokens} / {summary.completion_tokens}")
    table.add_row("seconds", f"{summary.seconds:.1f}")
    return table
