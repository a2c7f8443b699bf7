"""Progress of long CLI jobs: a live bar on a terminal, periodic one-line reports in a log (CI, pipes, files).

A CI log must never sit silent for a minute: when the console is not a terminal, `JobProgress` prints a plain line
when the job starts, then at most every `interval` seconds (``$GYMVERSE_PROGRESS_INTERVAL``, default 10) and once
at the end. The live bar is rich's, used when rich is installed (the ``rich`` extra; the `gymverse` CLI has it):
core needs only numpy, so without rich the plain lines are printed on a terminal too.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol, TextIO

DEFAULT_INTERVAL = 10.0


class ConsoleLike(Protocol):
    """What `JobProgress` prints plain lines through: a rich ``Console``, or `PlainConsole` without rich."""

    @property
    def is_terminal(self) -> bool:
        """Whether the output is a terminal (a live bar is drawn only there)."""
        ...

    def print(self, text: str, /, *, markup: bool = ..., highlight: bool = ..., soft_wrap: bool = ...) -> None:
        """Write one line."""
        ...


class PlainConsole:
    """Plain lines on a text stream (default: ``sys.stderr`` at print time, so captured output is honoured)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        """The stream lines go to."""
        return self._stream if self._stream is not None else sys.stderr

    @property
    def is_terminal(self) -> bool:
        """Whether the stream is a terminal."""
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty()) if callable(isatty) else False

    def print(self, text: str, /, *, markup: bool = False, highlight: bool = False, soft_wrap: bool = True) -> None:
        """Write `text` and a newline, flushed (markup and wrapping are rich's: plain text has neither)."""
        self.stream.write(f"{text}\n")
        self.stream.flush()


def default_console() -> ConsoleLike:
    """A rich console on stderr when rich is installed, else a `PlainConsole` on stderr."""
    try:
        from rich.console import Console
    except ImportError:
        return PlainConsole()
    return Console(stderr=True)


def progress_interval() -> float:
    """Seconds between plain progress lines: ``$GYMVERSE_PROGRESS_INTERVAL`` or 10."""
    try:
        return max(0.0, float(os.environ.get("GYMVERSE_PROGRESS_INTERVAL", DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def _live_bar(label: str, total: int | None, console: ConsoleLike, transient: bool) -> tuple[Any, Any] | None:
    """A started-later rich progress bar and its task, or None where rich is missing or `console` is not rich's."""
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        return None
    if not isinstance(console, Console):
        return None
    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.description}"), TimeElapsedColumn())  # fmt: skip
    bar = Progress(*columns, console=console, transient=transient)
    return bar, bar.add_task("", total=total)


class JobProgress:
    """Progress over `total` units of a job called `label` (``total=None`` while still unknown); a context manager.

    ``enabled=False`` silences it. On a terminal with rich installed it is a transient rich bar; elsewhere it
    writes lines such as ``evaluate: 12/85 (14%) 31s checking logic:LatinSquare``. ``console`` defaults to
    `default_console()`.
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        console: ConsoleLike | None = None,
        enabled: bool = True,
        interval: float | None = None,
        transient: bool = True,
    ) -> None:
        self.console = console if console is not None else default_console()
        self.label, self.total, self.enabled = label, total, enabled
        self.completed, self.description = 0, ""
        self.interval = progress_interval() if interval is None else interval
        self._started = self._last = 0.0
        live = _live_bar(label, total, self.console, transient) if enabled and self.console.is_terminal else None
        self._bar: Any = live[0] if live is not None else None  # rich's Progress: rich is optional, so Any
        self._task: Any = live[1] if live is not None else None
        self.live = self._bar is not None

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


__all__ = ["ConsoleLike", "JobProgress", "PlainConsole", "default_console", "progress_interval"]
