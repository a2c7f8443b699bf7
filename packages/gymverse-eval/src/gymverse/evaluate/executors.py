"""Where evaluation jobs run: a warm sandbox pool (default), plain worker processes, or inline.

A job is an importable callable (``"package.module:function"``) plus JSON keyword arguments, returning a JSON
dict. Untrusted env code should only run inside the sandbox: `SandboxExecutor` gives every job a fresh process
forked from a warm worker, under time/memory/process limits, so a crashing or hanging env costs one job. A job
that dies comes back as ``{"error": "..."}``; executors never raise for a job's failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from gymverse.imports import import_object

JobResult = dict[str, Any]
EXECUTORS = ("sandbox", "process", "inline")
#: Modules every worker imports once up front so jobs start fast, after what an env host preloads (the packages
#: installed register those: `gymverse.sandbox.host_registrations.host_preload`).
PRELOAD = ("gymverse.evaluate.jobs", "gymverse.evaluate.correctness")


def invoke(target: str, kwargs: Mapping[str, Any]) -> JobResult:
    """Import ``module:function`` and call it with `kwargs` (what every executor runs)."""
    fn: Callable[..., JobResult] = import_object(target)
    return fn(**kwargs)


class Executor(Protocol):
    """Runs jobs concurrently; `submit` returns a future of the job's JSON dict."""

    workers: int
    name: str
    #: True when jobs cannot see the caller's files and get them through `submit(files=...)` instead.
    ships_files: bool

    def submit(
        self, target: str, kwargs: Mapping[str, Any], timeout: float, files: Mapping[str, str] | None = None
    ) -> Future[JobResult]:
        """Schedule one job (`files`: name -> text placed in the job's working directory, when `ships_files`)."""
        ...

    def close(self) -> None:
        """Stop workers."""
        ...

    def abandon(self) -> None:
        """Cancel queued jobs and return without waiting for running ones (Ctrl-C)."""
        ...


class InlineExecutor:
    """Runs jobs in threads of this process: fastest start, no isolation (trusted envs, tests)."""

    name = "inline"
    ships_files = False

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(self.workers)

    def submit(
        self, target: str, kwargs: Mapping[str, Any], timeout: float, files: Mapping[str, str] | None = None
    ) -> Future[JobResult]:
        """Run in a thread (no timeout enforcement)."""
        return self._pool.submit(_guarded, target, dict(kwargs))

    def close(self) -> None:
        """Wait for running jobs and stop the threads."""
        self._pool.shutdown(wait=True)

    def abandon(self) -> None:
        """Cancel queued jobs and return without waiting for running ones (Ctrl-C)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _guarded(target: str, kwargs: dict[str, Any]) -> JobResult:
    return _guarded_call(lambda **kw: invoke(target, kw), kwargs)


def _guarded_call(fn: Callable[..., JobResult], kwargs: dict[str, Any]) -> JobResult:
    try:
        return fn(**kwargs)
    except BaseException as err:  # a job's crash (even SystemExit from env code) must not end the evaluation
        if isinstance(err, KeyboardInterrupt):
            raise
        return {"error": f"job crashed: {type(err).__name__}: {err}"[:1000]}


class ProcessExecutor:
    """A fresh Python subprocess per job: crash isolation and a hard timeout, but no memory/network limits."""

    name = "process"
    ships_files = False

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, workers)
        self._threads = ThreadPoolExecutor(self.workers)

    def _run(self, target: str, kwargs: dict[str, Any], timeout: float) -> JobResult:
        cmd = [sys.executable, "-m", "gymverse.evaluate.executors", target]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            out, err = proc.communicate(json.dumps(kwargs).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the job's whole process group, children included
            proc.communicate()
            return {"error": f"job timed out after {timeout:g}s"}
        lines = out.decode(errors="replace").strip().splitlines()
        try:
            result = json.loads(lines[-1]) if lines else None
        except ValueError:
            result = None
        if proc.returncode == 0 and isinstance(result, dict):
            return result
        tail = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return {"error": f"job process exited with code {proc.returncode}: {tail}"[:1000]}

    def submit(
        self, target: str, kwargs: Mapping[str, Any], timeout: float, files: Mapping[str, str] | None = None
    ) -> Future[JobResult]:
        """Run in a fresh subprocess."""
        return self._threads.submit(self._run, target, dict(kwargs), timeout)

    def close(self) -> None:
        """Wait for running jobs."""
        self._threads.shutdown(wait=True)

    def abandon(self) -> None:
        """Cancel queued jobs and return without waiting for running ones (Ctrl-C)."""
        self._threads.shutdown(wait=False, cancel_futures=True)


class SandboxExecutor:
    """`gymverse.sandbox.SandboxPool` workers: each job in a fresh limited process (timeout, memory, no network)."""

    name = "sandbox"
    ships_files = True
    #: Correctness runs here, against envs hosted in sandboxes (`submit_trusted`, `correctness.check_hosted`).
    hosts_envs = True

    def __init__(self, workers: int = 2, readable_paths: Sequence[str] = (), memory_mb: int = 2048) -> None:
        from gymverse.sandbox import SandboxLimits

        self.workers = max(1, workers)
        self.readable_paths = list(readable_paths)
        self._limits_cls = SandboxLimits
        self._memory_mb = memory_mb
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self._threads = ThreadPoolExecutor(self.workers)
        # A hosted job keeps a core busy only while its host computes: while this side judges an answer (about a
        # sixth of the job's CPU) its host waits. Half again as many trusted jobs as workers keep the cores busy.
        self._trusted = ThreadPoolExecutor(self.workers + (self.workers + 1) // 2)

    def _workers(self) -> Any:
        """The sandbox pool, started on the first `submit`: `gymverse evaluate` hosts every env (`submit_trusted`)
        and never needs it."""
        from gymverse.sandbox import SandboxPool
        from gymverse.sandbox.host_registrations import host_preload

        with self._pool_lock:
            if self._pool is None:
                limits = self._limits_cls(timeout=300.0, memory_mb=self._memory_mb)
                paths = self.readable_paths
                preload = [*host_preload(), *PRELOAD]
                self._pool = SandboxPool(self.workers, limits, preload=preload, readable_paths=paths)
            return self._pool

    def _run(self, target: str, kwargs: dict[str, Any], timeout: float, files: dict[str, str]) -> JobResult:
        limits = self._limits_cls(timeout=timeout, memory_mb=self._memory_mb)
        try:
            res = self._workers().call(target, kwargs=kwargs, limits=limits, files=files)
        except Exception as err:
            return {"error": f"sandbox failure: {type(err).__name__}: {err}"}
        if res.ok and isinstance(res.return_value, dict):
            return res.return_value
        detail = res.error or (res.stderr.strip().splitlines() or [""])[-1]
        return {"error": f"sandbox {res.status}: {detail}"[:1000]}

    def submit(
        self, target: str, kwargs: Mapping[str, Any], timeout: float, files: Mapping[str, str] | None = None
    ) -> Future[JobResult]:
        """Run in a fresh sandboxed process; `files` are written into its private working directory."""
        return self._threads.submit(self._run, target, dict(kwargs), timeout, dict(files or {}))

    def submit_trusted(self, fn: Callable[..., JobResult], kwargs: Mapping[str, Any]) -> Future[JobResult]:
        """Run trusted code (checks driving hosted envs) on one of this executor's threads, in this process."""
        return self._trusted.submit(_guarded_call, fn, dict(kwargs))

    def host_limits(self, timeout: float) -> Any:
        """The limits of an env host: this executor's memory, `timeout` seconds in all."""
        return self._limits_cls(timeout=timeout, memory_mb=self._memory_mb)

    def close(self) -> None:
        """Stop the sandbox workers."""
        self._trusted.shutdown(wait=True)
        self._threads.shutdown(wait=True)
        if self._pool is not None:
            self._pool.close()

    def abandon(self) -> None:
        """Cancel queued jobs and return without waiting for running ones (Ctrl-C): their hosts end with us."""
        self._trusted.shutdown(wait=False, cancel_futures=True)
        self._threads.shutdown(wait=False, cancel_futures=True)


def make_executor(kind: str, workers: int | None = None, readable_paths: Sequence[str] = ()) -> Executor:
    """Build an executor by name; ``sandbox`` falls back to ``process`` (with a note) if it cannot be set up."""
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


def _child_main() -> int:
    """``python -m gymverse.evaluate.executors TARGET`` with JSON kwargs on stdin: one JSON line out."""
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # env prints must not corrupt the result line
        result = _guarded(sys.argv[1], json.loads(sys.stdin.read() or "{}"))
    print(json.dumps(result), file=stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())


__all__ = ["EXECUTORS", "Executor", "InlineExecutor", "ProcessExecutor", "SandboxExecutor", "invoke", "make_executor"]
