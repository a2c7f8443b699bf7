"""Rich progress for a synthesis run (the run-summary table is `synth_summary`)."""

from __future__ import annotations

import sys
from typing import Any

from gymverse.progress import JobProgress
from rich.console import Console


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
