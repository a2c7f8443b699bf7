"""Blocking env calls on a thread pool, bounded so that hung envs cannot starve healthy ones.

A blocking call cannot be interrupted: after ``step_timeout`` it is abandoned to its thread. Two rules keep that
from hurting anyone else: the timeout counts from when the call *starts running* (time spent queued behind a hung
env is not the queued env's fault, so it is never blamed), and every abandoned call gets its thread replaced (the
pool grows by one), so ``max_workers`` hung envs cannot take every thread away from the healthy ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gymverse.pool.faults import StepTimeout
from gymverse.protocol import EnvLike
from gymverse.pycompat import timeout as timeout_after


class BlockingRunner:
    """A thread pool for blocking env calls with start-to-finish timeouts (see the module docstring)."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "gymverse-env") -> None:
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.abandoned = 0  # calls left running after their timeout
        self._lock = threading.Lock()

    async def call(self, timeout: float | None, fn: Callable[..., Any], *args: Any, limit: str = "step_timeout") -> Any:
        """Run ``fn(*args)`` in the pool; `StepTimeout` (naming `limit`) if it runs longer than `timeout`."""
        loop = asyncio.get_running_loop()
        if timeout is None:
            return await loop.run_in_executor(self.executor, fn, *args)
        started: asyncio.Future[None] = loop.create_future()

        def run() -> Any:
            with contextlib.suppress(RuntimeError):  # the loop may be gone by the time a late call starts
                loop.call_soon_threadsafe(_resolve, started)
            return fn(*args)

        task = loop.run_in_executor(self.executor, run)
        await asyncio.wait((task, started), return_when=asyncio.FIRST_COMPLETED)
        try:
            async with timeout_after(timeout):
                return await task
        except TimeoutError:
            self._abandon()
            raise StepTimeout(f"env call exceeded {limit}={timeout}s") from None

    def _abandon(self) -> None:
        with self._lock:
            self.abandoned += 1
            # The hung call keeps its thread for good: let the pool start one more (ThreadPoolExecutor starts
            # threads on demand up to _max_workers; there is no public way to resize it).
            self.executor._max_workers += 1
        with contextlib.suppress(RuntimeError):  # a submit is what starts the new thread for the queued calls
            self.executor.submit(_nothing)

    def shutdown(self) -> None:
        """Stop the pool without waiting for abandoned calls."""
        self.executor.shutdown(wait=self.abandoned == 0, cancel_futures=True)


def _nothing() -> None:
    pass


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def is_native_async(env: EnvLike) -> bool:
    """True when the outermost env object itself defines coroutine ``astep`` and ``areset`` methods.

    Looked up on the type, so a wrapper that only forwards attributes never lets the inner env's coroutines
    bypass the wrapper's own ``step``.
    """
    return inspect.iscoroutinefunction(getattr(type(env), "astep", None)) and inspect.iscoroutinefunction(
        getattr(type(env), "areset", None)
    )


def declares_nonblocking(env: EnvLike) -> bool:
    """True when the outermost env's class sets ``nonblocking = True``: its blocking ``step`` is cheap and never waits.

    The async backend then steps it inline on the event loop instead of in a worker thread (a thread hop costs
    ~100 µs, far more than a cheap step). Looked up on the type: a wrapper must declare it for itself.
    """
    return getattr(type(env), "nonblocking", False) is True
