"""Bounded calls into env code: a deadline that interrupts a Python loop that never ends (checker, evaluation).

`deadline` arms ``SIGALRM`` (main thread of a worker process only: sandbox and process executors run jobs there).
In every thread it also records when the block must end (`remaining`), so code that *waits* on an env running
elsewhere (`gymverse.sandbox.hosted`: the env in a sandbox process) bounds its wait by it even where no signal can
be delivered. `CallTimeout` derives from BaseException so that an env's ``except Exception:`` cannot swallow it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class CallTimeout(BaseException):
    """A reset, step or episode did not finish within its deadline."""


_local = threading.local()


def can_interrupt() -> bool:
    """True where `deadline` is enforced by a signal (main thread, SIGALRM available)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def remaining() -> tuple[float, str] | None:
    """Seconds left of the innermost-expiring `deadline` active in this thread and its timeout message, or None."""
    stack: list[tuple[float, str]] = getattr(_local, "stack", [])
    if not stack:
        return None
    ends, message = min(stack)
    return ends - time.monotonic(), message


@contextmanager
def _recorded(seconds: float, message: str) -> Iterator[None]:
    stack: list[tuple[float, str]] = _local.__dict__.setdefault("stack", [])
    entry = (time.monotonic() + seconds, message)
    stack.append(entry)
    try:
        yield
    finally:
        stack.remove(entry)


@contextmanager
def deadline(seconds: float | None, what: str = "call") -> Iterator[None]:
    """Raise `CallTimeout` in the block after `seconds` (None or <= 0: no limit; nesting keeps the earlier alarm)."""
    if not seconds or seconds <= 0:
        yield
        return
    message = f"{what} did not finish within {seconds:g}s"
    if not can_interrupt() or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        with _recorded(seconds, message):
            yield
        return

    def fire(signum: int, frame: FrameType | None) -> None:
        raise CallTimeout(message)

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        with _recorded(seconds, message):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["CallTimeout", "can_interrupt", "deadline", "remaining"]
