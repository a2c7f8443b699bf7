"""Host side of a sandboxed job: job spec, spawning the launcher, capped output collection, deadline, killing.

Used by `Sandbox` (execs a fresh launcher, directly or under bwrap) and by `SandboxPool` (a zygote forks the
launcher); both share every step except how the launcher comes to exist.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import json
import os
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from gymverse.sandbox import _bwrap, _child, _isolation, _monitor, _protocol
from gymverse.sandbox._monitor import RESULT_FD, SPEC_FD
from gymverse.sandbox.config import STATUSES

#: How long to keep draining pipes after the job is over (only matters when stragglers cannot be killed).
DRAIN_GRACE = 1.0
#: The monitor enforces the timeout itself and reports; the host kills the launcher this much later as a backstop.
KILL_GRACE = 1.0

#: Command line of a freshly exec'd launcher; argv: gymverse package dir, role, parent pid (see `_child.STUBS`).
BOOTSTRAP = _child.STUBS + "from gymverse.sandbox._monitor import main; main(sys.argv[2], int(sys.argv[3]))"

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


def check_file_names(files: dict[str, str | bytes]) -> None:
    """Reject names that escape the work dir or collide (a file used as another file's directory)."""
    seen: set[str] = set()
    for name in files:
        rel = os.path.normpath(name)
        if os.path.isabs(rel) or rel == os.curdir or rel.split(os.sep)[0] == os.pardir:
            raise ValueError(f"sandbox file name {name!r} escapes the work dir")
        seen.add(rel)
    for rel in seen:
        parent = os.path.dirname(rel)
        while parent:
            if parent in seen:
                raise ValueError(f"sandbox file name {rel!r} needs {parent!r} to be a directory, but it is a file")
            parent = os.path.dirname(parent)


def prepare(spec: dict[str, Any], files: dict[str, str | bytes] | None, mounts_ok: bool) -> dict[str, Any]:
    """Fill in the spec's work dir, files and mount plan.

    With a mount namespace the work dir lives in the job's own limited tmpfs (the monitor writes the files there,
    and it vanishes with the job); without one it is a host temp dir, removed by `cleanup`.
    """
    files = files or {}
    check_file_names(files)
    if mounts_ok:
        spec["workdir"] = f"/tmp/gymverse-sbx-{secrets.token_hex(6)}"
        spec["files"] = {
            n: base64.b64encode(d.encode() if isinstance(d, str) else d).decode() for n, d in files.items()
        }
        spec["mounts"] = mount_plan(spec.get("readable_paths", []))
        return spec
    workdir = tempfile.mkdtemp(prefix="gymverse-sbx-")
    spec["workdir"] = spec["host_workdir"] = workdir
    spec["files"], spec["mounts"] = {}, None
    try:
        for name, content in files.items():
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
    except BaseException:
        cleanup(spec)
        raise
    return spec


def mount_plan(readable_paths: Sequence[str]) -> dict[str, list[str]]:
    """Which dirs a job's mount namespace covers with tmpfs, and what it binds back (for `sys.path` as it is now)."""
    return _mount_plan(tuple(readable_paths), tuple(sys.path))


@functools.lru_cache(maxsize=64)
def _mount_plan(readable: tuple[str, ...], sys_path: tuple[str, ...]) -> dict[str, list[str]]:
    # Resolving every sys.path entry costs ~1 ms per job; the plan only changes with these inputs.
    return _isolation.plan_masks(_isolation.needed_paths(list(readable)))


def output_pipe() -> tuple[int, int]:
    """A pipe for the job's stdout/stderr (enlarged: a chatty job costs fewer wake-ups to drain)."""
    r, w = os.pipe()
    with contextlib.suppress(OSError):
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
    return r, w


def use_bwrap() -> bool:
    """Whether fresh jobs start under bubblewrap here (see `_bwrap`)."""
    return sys.platform.startswith("linux") and _bwrap.usable()


def spawn_exec(
    spec: dict[str, Any], bwrap: bool, stdio: tuple[int, int] | None = None
) -> tuple[int, int, int, int, int, int | None]:
    """Exec a fresh launcher (under bwrap or not); returns (pid, pidfd, stdout fd, stderr fd, result fd, bwrap
    info fd or None).

    `stdio`: the job's stdin and stdout instead of ``/dev/null`` and a captured pipe (an env host's request and
    answer pipes); the returned stdout fd then reads EOF at once.
    """
    out_r, out_w = output_pipe()
    err_r, err_w = output_pipe()
    res_r, res_w = os.pipe()
    spec_r, spec_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    stdin, stdout = stdio if stdio is not None else (devnull, out_w)
    actions = [
        (os.POSIX_SPAWN_DUP2, stdin, 0),
        (os.POSIX_SPAWN_DUP2, stdout, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_DUP2, spec_r, SPEC_FD),
        (os.POSIX_SPAWN_DUP2, res_w, RESULT_FD),
    ]
    role, parent = ("bwrap", 0) if bwrap else ("launch", os.getpid())
    argv = [sys.executable, "-I", "-S", "-c", BOOTSTRAP, package_dir(), role, str(parent)]
    info_r, info_w = os.pipe() if bwrap else (None, None)
    if info_w is not None:
        actions.append((os.POSIX_SPAWN_DUP2, info_w, _bwrap.INFO_FD))
        argv = _bwrap.command(spec["limits"]["network"], info_fd=_bwrap.INFO_FD) + argv
    path = shutil.which(argv[0]) or argv[0]
    try:
        pid = os.posix_spawn(path, argv, SPAWN_ENV, file_actions=actions, setsid=True)
    except BaseException:
        if info_r is not None:
            os.close(info_r)
        raise
    finally:
        for fd in (out_w, err_w, res_w, spec_r, devnull, *([] if info_w is None else [info_w])):
            os.close(fd)
    pidfd = os.pidfd_open(pid)
    with os.fdopen(spec_w, "wb") as f:  # the launcher reads it all before doing anything else
        f.write(json.dumps(spec).encode())
    return pid, pidfd, out_r, err_r, res_r, info_r


def kill(pidfd: int, pid: int, uid: int | None, spec: dict[str, Any]) -> None:
    """Kill a fresh job's launcher, and with it the job."""
    # Killing the launcher tears down the job's PID namespace (the monitor's death signal); without one, kill the
    # session and every process of the job's uid.
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    if spec.get("mounts") is None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        if uid is not None:
            _isolation.reap_uid(uid)


def supervise(
    fds: tuple[int, ...],
    limits: dict[str, Any],
    start: float,
    kill: Callable[[], None],
    *,
    pidfd: int | None = None,
    kill_on_error: bool = True,
) -> tuple[CappedBuffer, CappedBuffer, list[bytes], bool]:
    """Drain the job's stdout, stderr (capped) and result channels (`fds`, in that order) until all are closed
    and, with `pidfd`, the launcher exited; `kill` at the backstop deadline (and on any exception, Ctrl-C
    included, before it propagates, when `kill_on_error`). Returns (stdout, stderr, channel bytes, timed out).
    Closes `fds` and `pidfd`."""
    bufs = {fds[0]: CappedBuffer(limits["max_output_bytes"]), fds[1]: CappedBuffer(limits["max_output_bytes"])}
    raw = {fd: bytearray() for fd in fds[2:]}
    poller = select.poll()  # not a selector: no epoll set to create, fill and close per job
    for fd in fds:
        poller.register(fd, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    deadline = start + limits["timeout"] + KILL_GRACE
    timed_out, exited, drain_until = False, pidfd is None, float("inf")
    open_fds = set(fds)
    try:
        while open_fds or not exited:
            now = time.monotonic()
            if not timed_out and now >= deadline and (pidfd is None or not exited):
                timed_out = True
                kill()
                if exited:  # nothing left to wait for but the pipes, which the kill closes
                    drain_until = now + DRAIN_GRACE
            if now >= drain_until:
                break
            wait = (deadline if not timed_out else drain_until) - now
            for fd, _ in poller.poll(max(0.0, min(wait, 1.0)) * 1000):
                if fd == pidfd:
                    exited = True
                    poller.unregister(pidfd)
                    kill()
                    drain_until = time.monotonic() + DRAIN_GRACE
                    continue
                data = os.read(fd, 1 << 20)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                elif fd in bufs:
                    bufs[fd].feed(data)
                elif len(raw[fd]) <= _protocol.RESULT_CAP + 4096:
                    raw[fd] += data
    finally:
        if kill_on_error and (open_fds or not exited):
            kill()
        for fd in (*fds, *([] if pidfd is None else [pidfd])):
            os.close(fd)
    return bufs[fds[0]], bufs[fds[1]], [bytes(raw[fd]) for fd in fds[2:]], timed_out


def finish(
    out: dict[str, Any], stdout: CappedBuffer, stderr: CappedBuffer, limits: dict[str, Any], start: float
) -> dict[str, Any]:
    """Add output and wall time to a result dict (and classify a MemoryError that struck while reporting)."""
    out.update(
        stdout=stdout.text(),
        stderr=stderr.text(),
        stdout_truncated=stdout.truncated,
        stderr_truncated=stderr.truncated,
        wall_time=time.monotonic() - start,
    )
    if out["status"] == "error" and "MemoryError" in out["stderr"] and "before reporting" in (out["error"] or ""):
        # MemoryError can strike while the job is reporting it: still a memory failure
        out.update(status="memory", error=f"address-space limit of {limits['memory_mb']} MB reached ({out['error']})")
    return out


def pool_result(value: bytes, status: bytes, timed_out: bool, limits: dict[str, Any]) -> dict[str, Any]:
    """A pool job's result: the status from what its zygote observed (`status`), the value and the measures in
    force from the job's own value pipe (whose first line the job wrote before running any untrusted code)."""
    first = _protocol.parse(value.split(b"\n", 1)[0]) if value else None
    applied = first.get("applied") if first else None
    isolation = [str(x) for x in applied] if isinstance(applied, list) else []
    if len(status) != _protocol.JOB_REPORT.size:
        # The zygote died (or was killed at the backstop deadline) before it could report
        out: dict[str, Any] = {"isolation": isolation, "exit_code": None, "signal": None}
        if timed_out:
            out.update(status="timeout", error=f"wall-clock timeout of {limits['timeout']} s exceeded")
        else:
            out.update(status="killed", error="sandbox pool worker died")
        return out
    wait_status, cpu, peak_rss_kb, deadline_passed = _protocol.JOB_REPORT.unpack(status)
    out = _monitor.outcome(wait_status, value, deadline_passed, cpu, limits)
    out["max_rss_kb"] = out.pop("peak_rss_kb", None) or peak_rss_kb
    out["isolation"] = isolation
    return out


def result_from(data: bytes, timed_out: bool, limits: dict[str, Any]) -> dict[str, Any]:
    """The result dict from the monitor's messages (an isolation line, then the final one), checked field by field."""
    isolation: list[str] = []
    final: dict[str, Any] | None = None
    for line in data.splitlines():
        msg = _protocol.parse(line)
        if msg is None:
            continue
        if isinstance(msg.get("isolation"), list):
            isolation = [str(x) for x in msg["isolation"]]
        if msg.get("status") in STATUSES:
            final = msg
    out: dict[str, Any] = {"isolation": isolation, "exit_code": None, "signal": None}
    if final is None:
        if timed_out:
            out.update(status="timeout", error=f"wall-clock timeout of {limits['timeout']} s exceeded")
        else:
            out.update(status="killed", error="the sandbox monitor died before reporting a result")
        return out
    out.update(
        status=final["status"],
        error=_protocol.as_str(final.get("error")),
        return_value=final.get("return_value"),
        value_repr=_protocol.as_str(final.get("value_repr")),
        exit_code=_protocol.as_int(final.get("exit_code")),
        signal=_protocol.as_int(final.get("signal")),
        cpu_time=float(final["cpu_time"]) if isinstance(final.get("cpu_time"), int | float) else 0.0,
        max_rss_kb=_protocol.as_int(final.get("peak_rss_kb")) or 0,
    )
    if isinstance(final.get("isolation"), list):
        out["isolation"] = [str(x) for x in final["isolation"]]
    return out


def cleanup(spec: dict[str, Any]) -> None:
    """Delete the job's host work dir (only jobs without a mount namespace have one)."""
    if spec.get("host_workdir"):
        shutil.rmtree(spec["host_workdir"], ignore_errors=True)
