"""Backports of the few Python 3.11 standard-library features GymVerse uses (it supports Python 3.10-3.12).

Shared by every GymVerse package. On Python 3.11+ each name is the stdlib feature itself; the ``_*_backport``
versions are what Python 3.10 runs (defined on every version so the tests exercise them on the interpreter CI has).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

#: What `asyncio.wait_for` and `concurrent.futures.Future.result` raise on a timeout: the builtin `TimeoutError` on
#: Python 3.11+, their own classes on 3.10.
TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)


@asynccontextmanager
async def _timeout_backport(delay: float | None) -> AsyncIterator[None]:
    """`asyncio.timeout` for Python 3.10: cancels the current task in place after `delay` seconds and raises the
    builtin `TimeoutError` (as 3.11 does) instead of the cancellation; ``None`` never times out."""
    if delay is None:
        yield
        return
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("timeout() must be used inside a task")
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(max(delay, 0.0), expire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise TimeoutError from None
        raise
    finally:
        handle.cancel()


if sys.version_info >= (3, 11):

    def timeout(delay: float | None) -> AbstractAsyncContextManager[object]:
        """`asyncio.timeout` (Python 3.11+)."""
        return asyncio.timeout(delay)

else:  # Python 3.10
    timeout = _timeout_backport
