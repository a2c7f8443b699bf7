"""Parent side of a sandboxed job: work dir, spawning, capped output collection, deadline, killing, cleanup.

Used by `Sandbox` (spawns a fresh interpreter) and by pool workers (fork a pre-warmed one); both share every
step except how the child process comes to exist.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from gymverse.sandbox import _isolation

#: Result channel cap: a return value larger than this is reported as an error, not buffered.
RESULT_CAP = 32 * 1024 * 1024
#: How long to keep draining pipes after the job is over (only matters when stragglers cannot be killed).
DRAIN_GRACE = 1.0

#: Command line of a freshly exec'd child; argv: gymverse package dir, spec fd, result fd. Stub `gymverse` and
#: `gymverse.sandbox` packages let the child load only the modules it needs: the real `__init__`s import numpy
#: and dataclasses, which would triple the start-up time of every job.
STUBS = (
    "import sys, types\n"
    "for name, sub in (('gymverse', ''), ('gymverse.sandbox', '/sandbox')):\n"
    "    m = types.ModuleType(name); m.__path__ = [sys.argv[1] + sub]; sys.modules[name] = m\n"
)
BOOTSTRAP = STUBS + "from gymverse.sandbox._child import main; main(int(sys.argv[2]), int(sys.argv[3]))"


SPEC_FD, RESULT_FD = 3, 4
F_SETPIPE_SZ = 1031
#: Environment of the exec'd child/worker (secrets never reach even its initial environ). Few malloc arenas: glibc
#: reserves 64 MB of address space per thread arena, which would make RLIMIT_AS fail threaded code at a few threads.
SPAWN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MALLOC_ARENA_MAX": "2"}


def package_root() -> str:
    """Directory that contains the `gymverse` package."""
    return os.path.dirname(package_dir())


def package_dir() -> str:
    """The `gymverse` package directory."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CappedBuffer:
    """Keeps the first 3/4 and the last 1/4 of `cap` bytes of a stream and counts what it dropped."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap - cap // 4
        self.tail_cap = cap // 4
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk."""
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_cap:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:  # amortized trimming
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        """Whether anything was dropped."""
        return self.total > self.head_cap + self.tail_cap

    def text(self) -> str:
        """Decoded content with a marker where bytes were dropped."""
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b""
        dropped = self.total - len(self.head) - len(tail)
        marker = f"\n[... {dropped} bytes truncated (total {self.total}) ...]\n"
        return self.head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")


def prepare(spec: dict[str, Any], files: dict[str, str | bytes] | None, mounts_ok: bool) -> dict[str, Any]:
    """Create the private work dir (owned by the job uid) and fill in the spec's workdir and mount plan."""
    for name in files or {}:
        rel = os.path.normpath(name)
        if os.path.isabs(rel) or rel == os.curdir or rel.split(os.sep)[0] == os.pardir:
            raise ValueError(f"sandbox file name {name!r} escapes the work dir")
    workdir = tempfile.mkdtemp(prefix="gymverse-sbx-")
    for name, content in (files or {}).items():
        path = os.path.join(workdir, os.path.normpath(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
    uid = spec.get("uid")
    if uid is not None:
        for root, dirs, names in os.walk(workdir):
            for entry in [root, *(os.path.join(root, n) for n in dirs + names)]:
                os.chown(entry, uid, uid)
    os.chmod(workdir, 0o700)
    spec["workdir"] = workdir
    if mounts_ok:
        spec["mounts"] = _isolation.plan_masks(_isolation.needed_paths([workdir, *spec.get("readable_paths", [])]))
        spec["writable"] = [os.path.realpath(workdir)]
    return spec


def _output_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    with contextlib.suppress(OSError):  # bigger pipes: a chatty job costs fewer wake-ups to drain
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    return r, w


def spawn_exec(spec: dict[str, Any]) -> tuple[int, int, int, int]:
    """Start a fresh interpreter as a new session; returns (pid, stdout fd, stderr fd, result fd)."""
    out_r, out_w = _output_pipe()
    err_r, err_w = _output_pipe()
    res_r, res_w = os.pipe()
    spec_r, spec_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    actions = [
        (os.POSIX_SPAWN_DUP2, devnull, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_DUP2, spec_r, SPEC_FD),
        (os.POSIX_SPAWN_DUP2, res_w, RESULT_FD),
    ]
    argv = [sys.executable, "-I", "-S", "-c", BOOTSTRAP, package_dir(), str(SPEC_FD), str(RESULT_FD)]
    try:
        pid = os.posix_spawn(sys.executable, argv, SPAWN_ENV, file_actions=actions, setsid=True)
    finally:
        for fd in (out_w, err_w, res_w, spec_r, devnull):
            os.close(fd)
    with os.fdopen(spec_w, "wb") as f:  # the child reads it all before doing anything else
        f.write(json.dumps(spec).encode())
    return pid, out_r, err_r, res_r


def spawn_fork(spec: dict[str, Any], run_job: Callable[[dict[str, Any], int], None]) -> tuple[int, int, int, int]:
    """Fork this (single-threaded, pre-warmed) process; the child runs `run_job`. Same return as `spawn_exec`."""
    out_r, out_w = _output_pipe()
    err_r, err_w = _output_pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(res_w, RESULT_FD)
            os.closerange(RESULT_FD + 1, 1 << 16)
            # The forked interpreter's sys streams may point anywhere (the worker uses fd 1 for its protocol).
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            run_job(spec, RESULT_FD)
        finally:
            os._exit(70)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    return pid, out_r, err_r, res_r


def _kill_job(pid: int, uid: int | None) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if uid is not None:
        _isolation.reap_uid(uid)


def _classify(
    status: int, final: dict[str, Any] | None, timed_out: bool, cpu: float, limits: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"exit_code": None, "signal": None}
    if os.WIFSIGNALED(status):
        out["signal"] = os.WTERMSIG(status)
    else:
        out["exit_code"] = os.waitstatus_to_exitcode(status)
    if timed_out:
        out.update(status="timeout", error=f"wall-clock timeout of {limits['timeout']} s exceeded")
    elif final is not None and "status" in final:
        out.update({k: v for k, v in final.items() if k in ("status", "error", "return_value", "value_repr")})
    elif out["signal"] == signal.SIGXCPU or (out["signal"] == signal.SIGKILL and cpu >= limits["cpu_seconds"]):
        out.update(status="timeout", error=f"CPU time limit of {limits['cpu_seconds']} s exceeded")
    elif out["signal"] is not None:
        out.update(status="killed", error=f"killed by signal {signal.Signals(out['signal']).name}")
    else:
        out.update(status="error", error=f"exited with code {out['exit_code']} before reporting a result")
    return out


def supervise(pid: int, fds: tuple[int, int, int], spec: dict[str, Any], start: float) -> dict[str, Any]:
    """Collect capped output until the job ends or its deadline passes; kill everything left; return a result."""
    limits, uid = spec["limits"], spec.get("uid")
    bufs = {fds[0]: CappedBuffer(limits["max_output_bytes"]), fds[1]: CappedBuffer(limits["max_output_bytes"])}
    res_buf = bytearray()
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    pidfd = os.pidfd_open(pid)
    sel.register(pidfd, selectors.EVENT_READ)
    deadline = start + limits["timeout"]
    timed_out, exited, drain_until = False, False, float("inf")
    open_fds = set(fds)
    try:
        while open_fds or not exited:
            now = time.monotonic()
            if not exited and now >= deadline:
                timed_out = True
                _kill_job(pid, uid)
                deadline = float("inf")
            if exited and now >= drain_until:
                break
            wait = min(deadline, drain_until) - now
            for key, _ in sel.select(timeout=max(0.0, min(wait, 1.0))):
                fd = int(key.fd)
                if fd == pidfd:
                    exited = True
                    sel.unregister(pidfd)
                    _kill_job(pid, uid)  # the job is its main process: stragglers die with it
                    drain_until = time.monotonic() + DRAIN_GRACE
                    continue
                data = os.read(fd, 1 << 20)
                if not data:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                elif fd in bufs:
                    bufs[fd].feed(data)
                elif len(res_buf) <= RESULT_CAP:
                    res_buf += data
    finally:
        sel.close()
        for fd in (*fds, pidfd):
            os.close(fd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    cpu = usage.ru_utime + usage.ru_stime
    isolation: list[str] = []
    final: dict[str, Any] | None = None
    for line in bytes(res_buf).splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and "isolation" in msg and not isolation:
            isolation = [str(x) for x in msg["isolation"]]
        elif isinstance(msg, dict) and "status" in msg:
            final = msg
    if len(res_buf) > RESULT_CAP:
        final = {"status": "error", "error": f"return value exceeds {RESULT_CAP} bytes"}
    out = _classify(status, final, timed_out, cpu, limits)
    out_buf, err_buf = bufs[fds[0]], bufs[fds[1]]
    out.update(
        stdout=out_buf.text(),
        stderr=err_buf.text(),
        stdout_truncated=out_buf.truncated,
        stderr_truncated=err_buf.truncated,
        wall_time=wall,
        cpu_time=cpu,
        # The job's own high-water mark; wait4's ru_maxrss is only an upper bound (it can carry the parent's).
        max_rss_kb=int((final or {}).get("peak_rss_kb") or usage.ru_maxrss),
        isolation=isolation,
    )
    if final is None and out["status"] == "error" and "MemoryError" in out["stderr"]:
        # MemoryError can strike while the child is reporting it: still a memory failure
        out.update(status="memory", error=f"address-space limit of {limits['memory_mb']} MB reached ({out['error']})")
    return out


def cleanup(spec: dict[str, Any]) -> None:
    """Delete the job's work dir."""
    shutil.rmtree(spec["workdir"], ignore_errors=True)
