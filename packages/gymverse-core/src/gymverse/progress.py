"""Progress of long CLI jobs: a live bar on a terminal, periodic one-line reports in a log (CI, pipes, files).

A CI log must never sit silent for a minute: when the console is not a terminal, `JobProgress` prints a plain line
when the job starts, then at most every `interval` seconds (``$GYMVERSE_PROGRESS_INTERVAL``, default 10) and once
at the end.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

DEFAULT_INTERVAL = 10.0


def progress_interval() -> float:
    """Seconds between plain progress lines: ``$GYMVERSE_PROGRESS_INTERVAL`` or 10."""
    try:
        return max(0.0, float(os.environ.get("GYMVERSE_PROGRESS_INTERVAL", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


class JobProgress:
    """Progress over `total` units of a job called `label` (``total=None`` while still unknown); a context manager.

    ``enabled=False`` silences it. On a terminal it is a transient rich bar; elsewhere it writes lines such as
    ``evaluate: 12/85 (14%) 31s checking logic:LatinSquare``.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        console: Console,
        enabled: bool = True,
        interval: float | None = None,
        transient: bool = True,
    ) -> None:
        self.label, self.total, self.console, self.enabled = label, total, console, enabled
        self.completed, self.description = 0, ""
        self.interval = progress_interval() if interval is None else interval
        self.live = enabled and console.is_terminal
        self._started = self._last = 0.0
        self._bar: Progress | None = None
        self._task: Any = None
        if self.live:
            columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.description}"), TimeElapsedColumn())  # fmt: skip
            self._bar = Progress(*columns, console=console, transient=transient)
            self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> JobProgress:
        self._started = self._last = time.monotonic()
        if self._bar is not None:
            self._bar.__enter__()
        elif self.enabled:  # nothing is counted yet: say what starts, not "0 0s"
            todo = f" ({self.total} to do)" if self.total else ""
            self.console.print(f"{self.label}: started{todo}", markup=False, highlight=False, soft_wrap=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif self.enabled:
            self._line("interrupted" if exc[0] is not None else "done")

    def update(
        self,
        *,
        completed: int | None = None,
        total: int | None = None,
        advance: int = 0,
        description: str | None = None,
    ) -> None:
        """Move the job on: set `completed`/`total`, or `advance` by some units; `description` says what runs now."""
        if completed is not None:
            self.completed = completed
        self.completed += advance
        if total is not None:
            self.total = total
        if description:
            self.description = description
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, total=self.total, description=self.description)
        elif self.enabled and time.monotonic() - self._last >= self.interval:
            self._line(self.description)

    def _line(self, what: str) -> None:
        self._last = time.monotonic()
        count = f"{self.completed}/{self.total}" if self.total else str(self.completed)
        pct = f" ({100 * self.completed // self.total}%)" if self.total else ""
        elapsed = f"{self._last - self._started:.0f}s"
        text = f"{self.label}: {count}{pct} {elapsed} {what}".rstrip()
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


__all__ = ["JobProgress", "progress_interval"]
