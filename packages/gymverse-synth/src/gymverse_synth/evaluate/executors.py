"""Where evaluation jobs run: a warm sandbox pool (default), plain worker processes, or inline.

A job is an importable callable (``"package.module:function"``) plus JSON keyword arguments, returning a JSON
dict. Untrusted env code should only run inside the sandbox: `SandboxExecutor` gives every job a fresh process
forked from a warm worker, under time/memory/process limits, so a crashing or hanging env costs one job. A job
that dies comes back as ``{"error": "..."}``; executors never raise for a job's failure.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

JobResult = dict[str, Any]
EXECUTORS = ("sandbox", "process", "inline")
#: Modules every worker imports once up front so jobs start fast.
PRELOAD = ("numpy", "gymverse", "gymverse.envs", "gymverse.checker", "gymverse_synth.evaluate.jobs")


def invoke(target: str, kwargs: Mapping[str, Any]) -> JobResult:
    """Import ``module:function`` and call it with `kwargs` (what every executor runs)."""
    module_name, _, func_name = target.partition(":")
    fn: Callable[..., JobResult] = getattr(importlib.import_module(module_name), func_name)
    return fn(**kwargs)


class Executor(Protocol):
    """Runs jobs concurrently; `submit` returns a future of the job's JSON dict."""

    workers: int
    name: str

    def submit(self, target: str, kwargs: Mapping[str, Any], timeout: float) -> Future[JobResult]:
        """Schedule one job."""
        ...

    def close(self) -> None:
        """Stop workers."""
        ...


class InlineExecutor:
    """Runs jobs in threads of this process: fastest start, no isolation (trusted envs, tests)."""

    name = "inline"

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(self.workers)

    def submit(self, target: str, kwargs: Mapping[str, Any], timeout: float) -> Future[JobResult]:
        """Run in a thread (no timeout enforcement)."""
        return self._pool.submit(_guarded, target, dict(kwargs))

    def close(self) -> None:
        """Wait for running jobs and stop the threads."""
        self._pool.shutdown(wait=True)


def _guarded(target: str, kwargs: dict[str, Any]) -> JobResult:
    try:
        return invoke(target, kwargs)
    except BaseException as err:  # a job's crash (even SystemExit from env code) must not end the evaluation
        if isinstance(err, KeyboardInterrupt):
            raise
        return {"error": f"job crashed: {type(err).__name__}: {err}"[:1000]}


class ProcessExecutor:
    """Plain worker processes (spawned): CPU parallelism and crash isolation, but no resource limits."""

    name = "process"

    def __init__(self, workers: int = 2) -> None:
        import multiprocessing as mp

        self.workers = max(1, workers)
        self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"))

    def submit(self, target: str, kwargs: Mapping[str, Any], timeout: float) -> Future[JobResult]:
        """Run in a worker process."""
        inner = self._pool.submit(_guarded, target, dict(kwargs))
        outer: Future[JobResult] = Future()

        def done(f: Future[JobResult]) -> None:
            try:
                outer.set_result(f.result())
            except Exception as err:  # the worker process died (segfault, OOM kill)
                outer.set_result({"error": f"worker process died: {type(err).__name__}: {err}"})

        inner.add_done_callback(done)
        return outer

    def close(self) -> None:
        """Stop the worker processes."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class SandboxExecutor:
    """`gymverse.sandbox.SandboxPool` workers: each job in a fresh limited process (timeout, memory, no network)."""

    name = "sandbox"

    def __init__(self, workers: int = 2, readable_paths: Sequence[str] = (), memory_mb: int = 2048) -> None:
        from gymverse.sandbox import SandboxLimits, SandboxPool

        self.workers = max(1, workers)
        self._limits_cls = SandboxLimits
        self._memory_mb = memory_mb
        self._pool = SandboxPool(
            self.workers,
            SandboxLimits(timeout=300.0, memory_mb=memory_mb),
            preload=list(PRELOAD),
            readable_paths=list(readable_paths),
        )
        self._threads = ThreadPoolExecutor(self.workers)

    def _run(self, target: str, kwargs: dict[str, Any], timeout: float) -> JobResult:
        limits = self._limits_cls(timeout=timeout, memory_mb=self._memory_mb)
        try:
            res = self._pool.call(target, kwargs=kwargs, limits=limits)
        except Exception as err:
            return {"error": f"sandbox failure: {type(err).__name__}: {err}"}
        if res.ok and isinstance(res.return_value, dict):
            return res.return_value
        detail = res.error or (res.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"sandbox {res.status}: {detail}"[:1000]}

    def submit(self, target: str, kwargs: Mapping[str, Any], timeout: float) -> Future[JobResult]:
        """Run in a fresh sandboxed process."""
        return self._threads.submit(self._run, target, dict(kwargs), timeout)

    def close(self) -> None:
        """Stop the sandbox workers."""
        self._threads.shutdown(wait=True)
        self._pool.close()


def make_executor(kind: str, workers: int | None = None, readable_paths: Sequence[str] = ()) -> Executor:
    """Build an executor by name; ``sandbox`` falls back to ``process`` (with a note) if the pool cannot start."""
    n = workers or os.cpu_count() or 1
    if kind == "inline":
        return InlineExecutor(n)
    if kind == "process":
        return ProcessExecutor(n)
    if kind == "sandbox":
        try:
            return SandboxExecutor(n, readable_paths)
        except Exception as err:
            fallback = ProcessExecutor(n)
            fallback.name = f"process (sandbox unavailable: {type(err).__name__}: {err})"[:200]
            return fallback
    raise ValueError(f"unknown executor {kind!r}: expected one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "Executor", "InlineExecutor", "ProcessExecutor", "SandboxExecutor", "invoke", "make_executor"]
