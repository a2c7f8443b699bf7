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
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gymverse.sandbox import _protocol, _supervise
from gymverse.sandbox._zygote import BOOT
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


class Zygote:
    """Host handle of one zygote process (see `_zygote`)."""

    def __init__(self, preload: list[str], network: bool, mounts: dict[str, Any] | None = None) -> None:
        """Start a zygote; `mounts` (``{"plan", "limits"}``, the pool's mount plan and default limits) gives each
        job its own mount namespace, mounted ahead of the job; None: no mount namespaces."""
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = host
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", BOOT, _supervise.package_dir(), str(child.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(child.fileno(),),
                env=_supervise.SPAWN_ENV,
                start_new_session=True,
            )
        finally:
            child.close()
        sys_path = [_supervise.package_root(), *(p for p in sys.path if p)]
        init = {"sys_path": sys_path, "preload": preload, "network": network, "mounts": mounts}
        host.sendall(json.dumps(init).encode())
        host.settimeout(120.0)
        try:
            ready = json.loads(host.recv(1 << 16) or b"{}")
        except (OSError, ValueError):
            ready = {}
        host.settimeout(None)
        if not ready.get("ready"):
            self.kill()
            raise RuntimeError("sandbox pool zygote failed to start (see its stderr)")
        self.isolation: list[str] = list(ready["isolation"])

    def launch(self, spec: dict[str, Any], stdio: tuple[int, int] | None = None) -> tuple[int, int, int, int]:
        """Hand `spec` to the zygote's waiting job process; returns (stdout, stderr, value, status) read ends.

        `stdio`: the job's stdin and stdout (an env host's request and answer pipes; the caller keeps its copies)
        instead of ``/dev/null`` and a captured pipe; the stdout returned then reads as closed at once."""
        out_r, out_w = _supervise.output_pipe() if stdio is None else os.pipe()
        in_r = os.open(os.devnull, os.O_RDONLY) if stdio is None else os.dup(stdio[0])
        if stdio is not None:
            os.close(out_w)  # nothing to capture: the job's stdout is the caller's pipe
            out_w = os.dup(stdio[1])
        err_r, err_w = _supervise.output_pipe()
        value_r, value_w = os.pipe()
        status_r, status_w = os.pipe()
        spec_r, spec_w = os.pipe()
        try:
            uid = spec.get("uid")
            head = _protocol.JOB_HEAD.pack(float(spec["limits"]["timeout"]), -1 if uid is None else uid)
            _protocol.send_fds(self.sock, head, [spec_r, out_w, err_w, value_w, in_r, status_w])
        except BaseException:
            for fd in (out_r, err_r, value_r, status_r, spec_w):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, value_w, in_r, status_w, spec_r):
                os.close(fd)
        # The job process reads it all before anything else; if it died, the write fails and the zygote reports
        # the death on the status pipe.
        with contextlib.suppress(BrokenPipeError), os.fdopen(spec_w, "wb") as f:
            f.write(json.dumps(spec).encode())
        return out_r, err_r, value_r, status_r

    def alive(self) -> bool:
        """Whether the zygote process still runs."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """Stop the zygote; its jobs die with it."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
