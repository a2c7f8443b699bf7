"""`SandboxPool`: warm zygotes for many short sandboxed executions.

Each zygote is a long-lived interpreter that has already imported what jobs need (``preload``) and never handles
any job's data; each job's process is forked from it ahead of time and only then reads its spec, so no job can
find an earlier job's source, output or return value in its memory. The job is isolated and limited like a fresh
`Sandbox` job on the ctypes path (own IPC and mount namespaces, a PID namespace shared only with its zygote, own
uid, rlimits, private tmpfs work dir); the host collects its output in the calling thread. What the pool saves is
interpreter start-up and imports (see `_zygote`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gymverse.sandbox import _supervise
from gymverse.sandbox._zygote import Zygote
from gymverse.sandbox.config import SandboxLimits, SandboxResult
from gymverse.sandbox.runner import _SpecRunner, isolation_support


class SandboxPool(_SpecRunner):
    """`size` warm workers; `run`/`call` (as on `Sandbox`) block until one is free. Thread-safe; a context manager."""

    def __init__(
        self,
        size: int = 2,
        limits: SandboxLimits | None = None,
        *,
        preload: Sequence[str] = (),
        drop_privileges: bool = True,
        readable_paths: Sequence[str] = (),
    ) -> None:
        if size < 1:
            raise ValueError(f"SandboxPool size must be >= 1, got {size}")
        self.limits = limits or SandboxLimits()
        self.size = size
        self.preload = list(preload)
        self.drop_privileges = drop_privileges
        self.readable_paths = list(readable_paths)
        self._idle: queue.Queue[Zygote] = queue.Queue()
        self._all: list[Zygote] = []
        self._lock = threading.Lock()
        self._closed = False
        support = isolation_support()
        self._mounts_ok = bool(support.get("mountns")) and (
            (drop_privileges and bool(support.get("uid"))) or bool(support.get("userns"))
        )
        for _ in range(size):
            self._idle.put(self._add_zygote())

    def _add_zygote(self) -> Zygote:
        ahead = {"plan": _supervise.mount_plan(self.readable_paths), "limits": self.limits.to_spec()}
        zygote = Zygote(self.preload, self.limits.network, ahead if self._mounts_ok else None)
        with self._lock:
            if self._closed:
                zygote.kill()
                raise RuntimeError("SandboxPool is closed")
            self._all.append(zygote)
        return zygote

    def _acquire(self) -> Zygote:
        while True:
            if self._closed:
                raise RuntimeError("SandboxPool is closed")
            with contextlib.suppress(queue.Empty):
                return self._idle.get(timeout=0.1)

    def _release(self, zygote: Zygote) -> None:
        with self._lock:
            keep = not self._closed and zygote in self._all and zygote.alive()
            if not keep and zygote in self._all:
                self._all.remove(zygote)
        if keep:
            self._idle.put(zygote)
            return
        zygote.kill()
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self._idle.put(self._add_zygote())

    def _submit(self, spec: dict[str, Any], files: Mapping[str, str | bytes] | None) -> SandboxResult:
        if self._closed:
            raise RuntimeError("SandboxPool is closed")
        if spec["limits"]["network"] != self.limits.network:
            raise ValueError("a SandboxPool's network setting is fixed at construction (jobs share a netns)")
        start = time.monotonic()
        _supervise.prepare(spec, dict(files or {}), self._mounts_ok)
        zygote = self._acquire()
        try:
            try:
                fds = zygote.launch(spec)
            except OSError:
                zygote.kill()
                return SandboxResult(
                    status="killed", error="sandbox pool worker died", wall_time=time.monotonic() - start
                )
            # The zygote enforces the deadline; killing it is the backstop (its namespace dies with it). Leaving
            # (Ctrl-C, a StepTimeout) closes the status pipe, on which the zygote kills the job.
            limits = spec["limits"]
            out, err, (value, status), timed_out = _supervise.supervise(
                fds, limits, start, zygote.kill, kill_on_error=False
            )
            result = _supervise.pool_result(value, status, timed_out, limits)
            return SandboxResult.from_dict(_supervise.finish(result, out, err, limits, start))
        finally:
            self._release(zygote)
            _supervise.cleanup(spec)

    def map(self, sources: Sequence[str], *, limits: SandboxLimits | None = None) -> list[SandboxResult]:
        """Run many sources concurrently on all zygotes; results in input order."""
        with ThreadPoolExecutor(max_workers=self.size) as ex:
            return list(ex.map(lambda src: self.run(src, limits=limits), sources))

    def close(self) -> None:
        """Stop every zygote; jobs still running die with them (and report ``killed``)."""
        with self._lock:
            self._closed = True
            zygotes, self._all = self._all, []
        for zygote in zygotes:
            zygote.kill()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
