"""`SandboxPool`: warm workers for many short sandboxed executions.

Each worker is a long-lived interpreter that has already imported what jobs need (``preload``); a job runs in a
child freshly forked from it, isolated and limited exactly like `Sandbox` (own uid, namespaces, rlimits, private
work dir), so jobs never share state. What the pool saves is interpreter start-up and imports.
"""

from __future__ import annotations

import base64
import contextlib
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from gymverse.sandbox import _isolation, _supervise
from gymverse.sandbox._worker import read_msg, write_msg
from gymverse.sandbox.config import SandboxLimits, SandboxResult
from gymverse.sandbox.runner import _SpecRunner, isolation_support

WORKER_BOOT = _supervise.STUBS + "from gymverse.sandbox._worker import main; main()"
#: Extra time a worker gets beyond the job's own timeout before the pool declares it hung and replaces it.
BACKSTOP = 5.0


class _Worker:
    def __init__(self, preload: Sequence[str], network: bool, mounts: dict[str, list[str]] | None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", WORKER_BOOT, _supervise.package_dir()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_supervise.SPAWN_ENV,
            start_new_session=True,
        )
        sys_path = [_supervise.package_root(), *(p for p in sys.path if p)]
        write_msg(self._stdin, {"sys_path": sys_path, "preload": list(preload), "network": network, "mounts": mounts})
        ready = self._read(timeout=60.0)
        if not ready or not ready.get("ready"):
            self.kill()
            raise RuntimeError("sandbox pool worker failed to start (see its stderr)")

    @property
    def _stdin(self) -> IO[bytes]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def _read(self, timeout: float) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return read_msg(self.proc.stdout) if ready else None

    def execute(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        try:
            write_msg(self._stdin, spec)
            out: dict[str, Any] | None = self._read(timeout=spec["limits"]["timeout"] + BACKSTOP)
            return out
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # unflushed bytes to a dead worker: nothing to deliver
                    stream.close()


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
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        support = isolation_support()
        self._mounts_ok = bool(support.get("mountns")) and (
            (drop_privileges and bool(support.get("uid"))) or bool(support.get("userns"))
        )
        for _ in range(size):
            self._add_worker()

    def _add_worker(self) -> _Worker:
        mounts = None
        if self._mounts_ok:
            mounts = _isolation.plan_masks(_isolation.needed_paths(self.readable_paths))
        worker = _Worker(self.preload, self.limits.network, mounts)
        with self._lock:
            self._all.append(worker)
        self._idle.put(worker)
        return worker

    def _submit(self, spec: dict[str, Any], files: Mapping[str, str | bytes] | None) -> SandboxResult:
        if self._closed:
            raise RuntimeError("SandboxPool is closed")
        if spec["limits"]["network"] != self.limits.network:
            raise ValueError("a SandboxPool's network setting is fixed at construction (workers share a netns)")
        spec["files"] = {
            name: base64.b64encode(data.encode() if isinstance(data, str) else data).decode()
            for name, data in (files or {}).items()
        }
        worker = self._idle.get()
        start = time.monotonic()
        out = worker.execute(spec)
        if out is None:  # hung or dead worker: replace it, report the job as killed
            with self._lock:
                self._all.remove(worker)
            worker.kill()
            self._add_worker()
            return SandboxResult(status="killed", error="sandbox pool worker died", wall_time=time.monotonic() - start)
        self._idle.put(worker)
        if "stdout" not in out:  # setup failure inside the worker
            return SandboxResult(status="error", error=out.get("error"), wall_time=time.monotonic() - start)
        return SandboxResult.from_dict(out)

    def map(self, sources: Sequence[str], *, limits: SandboxLimits | None = None) -> list[SandboxResult]:
        """Run many sources concurrently on all workers; results in input order."""
        with ThreadPoolExecutor(max_workers=self.size) as ex:
            return list(ex.map(lambda src: self.run(src, limits=limits), sources))

    def close(self) -> None:
        """Stop every worker."""
        self._closed = True
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.kill()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
