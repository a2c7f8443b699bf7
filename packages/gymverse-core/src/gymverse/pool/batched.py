"""Cheap blocking env calls batched into one thread hop per event-loop iteration, with the same containment.

A session's step of a cheap env (a few µs of pure Python, ``nonblocking = True``) costs far more in the hop to a
worker thread and back than in the env: two cross-thread wakeups and a GIL hand-off per call. When many sessions
step on one event loop, their calls arrive in the same loop iteration; `BatchedCalls` queues them, runs the whole
batch in one worker thread one call after another, and wakes the loop once when the batch is done.

Containment is kept from the loop side, so no call can delay the others or outlive its deadline:

* `SPILL_S` after a batch starts, if it has not finished, the calls done so far are delivered, the ones not yet
  started move to a fresh batch (on another thread), and only the call running then stays on its thread;
* that call's own deadline (``timeout`` from when it *started*, as in `BlockingRunner`) ends it with `StepTimeout`,
  and its thread is given up to it (the runner grows by one thread, as for any abandoned call).

So a hung or slow env delays its batch-mates by at most `SPILL_S`, once, and every call is still timed from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from gymverse.pool.blocking import BlockingRunner
from gymverse.pool.faults import StepTimeout

#: Seconds a batch may run before its remaining calls spill to another thread.
SPILL_S = 0.005

_QUEUED, _RUNNING, _DONE, _MOVED, _EXPIRED = range(5)


class _Call:
    __slots__ = ("arg", "error", "fn", "future", "limit", "result", "started", "state", "timeout")

    def __init__(self, fn: Callable[[Any], Any], arg: Any, future: asyncio.Future[Any], timeout: float | None,
                 limit: str) -> None:  # fmt: skip
        self.fn, self.arg, self.future, self.timeout, self.limit = fn, arg, future, timeout, limit
        self.state = _QUEUED
        self.started = 0.0
        self.result: Any = None
        self.error: BaseException | None = None


class _Batch:
    __slots__ = ("calls", "given_up", "lock", "loop", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, calls: list[_Call]) -> None:
        self.loop, self.calls = loop, calls
        self.lock = threading.Lock()
        self.given_up = False  # the loop side took the calls not yet run elsewhere: stop after the current one
        self.timer: asyncio.TimerHandle | None = None


class BatchedCalls:
    """Batches cheap blocking calls per event loop onto a `BlockingRunner`'s threads (see the module docstring)."""

    def __init__(self, runner: BlockingRunner) -> None:
        self.runner = runner
        self._queues: dict[asyncio.AbstractEventLoop, list[_Call]] = {}
        self._lock = threading.Lock()

    async def call(self, timeout: float | None, fn: Callable[[Any], Any], arg: Any, limit: str = "step_timeout") -> Any:
        """``fn(arg)`` in this loop's next batch; `StepTimeout` (naming `limit`) if it runs longer than `timeout`."""
        loop = asyncio.get_running_loop()
        call = _Call(fn, arg, loop.create_future(), timeout, limit)
        with self._lock:
            queue = self._queues.get(loop)
            if queue is None:
                queue = self._queues[loop] = []
                loop.call_soon(self._flush, loop)
            queue.append(call)
        return await call.future

    # ------------------------------------------------------------------ loop side
    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            calls = self._queues.pop(loop, [])
        if calls:
            self._submit(_Batch(loop, calls))

    def _submit(self, batch: _Batch) -> None:
        batch.timer = batch.loop.call_later(SPILL_S, self._spill, batch)
        try:
            self.runner.executor.submit(self._run, batch)
        except RuntimeError as err:  # the executor is shut down (the pool was closed)
            batch.timer.cancel()
            for call in batch.calls:
                _settle(call.future, None, err)

    def _spill(self, batch: _Batch) -> None:
        """The batch is slow: deliver what is done, move what has not started, watch what is running."""
        with batch.lock:
            if batch.calls[0].state == _QUEUED:  # still waiting for a thread: moving it would not start it sooner
                batch.timer = batch.loop.call_later(SPILL_S, self._spill, batch)
                return
            batch.given_up = True
            running = [c for c in batch.calls if c.state == _RUNNING]
            waiting = [c for c in batch.calls if c.state == _QUEUED]
            for call in waiting:
                call.state = _MOVED
        self._deliver(batch)
        if waiting:
            fresh = [_Call(c.fn, c.arg, c.future, c.timeout, c.limit) for c in waiting]
            self._submit(_Batch(batch.loop, fresh))
        for call in running:
            if call.timeout is not None:
                # loop.time() is time.monotonic(), the clock `started` was read from
                batch.loop.call_at(call.started + call.timeout, self._expire, batch, call)

    def _expire(self, batch: _Batch, call: _Call) -> None:
        with batch.lock:
            if call.state != _RUNNING:
                return
            call.state = _EXPIRED
        self.runner._abandon()  # its thread stays with the hung call; the runner starts another
        _settle(call.future, None, StepTimeout(f"env call exceeded {call.limit}={call.timeout}s"))

    def _deliver(self, batch: _Batch) -> None:
        if batch.timer is not None and not batch.given_up:
            batch.timer.cancel()
        for call in batch.calls:
            if call.state == _DONE:
                _settle(call.future, call.result, call.error)

    # ------------------------------------------------------------------ worker side
    def _run(self, batch: _Batch) -> None:
        for call in batch.calls:
            with batch.lock:
                if batch.given_up or call.state != _QUEUED:
                    break
                call.state = _RUNNING
                call.started = time.monotonic()
            try:
                call.result = call.fn(call.arg)
            except BaseException as err:  # the awaiting session turns it into an env failure
                call.error = err
            with batch.lock:
                late = call.state == _EXPIRED
                if not late:
                    call.state = _DONE
                given_up = batch.given_up
            if given_up:  # the loop side moved the rest; hand this one back on its own (unless it expired)
                if not late:
                    _threadsafe(batch.loop, _settle, call.future, call.result, call.error)
                return
        _threadsafe(batch.loop, self._deliver, batch)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the session was cancelled (or the call expired) meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for these results any more
        loop.call_soon_threadsafe(fn, *args)


__all__ = ["SPILL_S", "BatchedCalls"]
