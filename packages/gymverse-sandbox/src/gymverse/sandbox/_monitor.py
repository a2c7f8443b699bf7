"""The trusted processes between the host and a job: the launcher (fresh jobs) and the monitor.

    fresh:  host --exec--> launcher --fork, new pid/ipc/mount/net namespaces--> monitor (pid 1) --fork--> job

(Pool jobs have no monitor of their own: their zygote plays that role, see `_zygote`.)

The monitor is the init of the job's PID namespace: it mounts the job's private file systems, forks the job,
enforces the wall-clock deadline itself, derives the status from the job's exit and reports to the host on a pipe
the job never holds. When the monitor ends, for any reason, the kernel kills every process left in the namespace.
Neither launcher nor monitor ever runs untrusted code or changes uid, so each keeps ``PR_SET_PDEATHSIG``: killing
the host, the launcher/zygote or the monitor tears the whole job down. Under bubblewrap, bwrap creates the
namespaces and runs the monitor as its pid 2 with ``--die-with-parent``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import signal
import sys
import time

from gymverse.sandbox import _child, _isolation, _protocol, _seccomp

# Not `typing.TYPE_CHECKING`: no `typing` in a zygote (see `_child`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SPEC_FD, RESULT_FD = 3, 4
#: How long to keep draining the job's value pipe after it exited (only stragglers outside a PID namespace).
DRAIN_GRACE = 1.0
NAMESPACES = (
    ("pidns", _isolation.CLONE_NEWPID),
    ("ipcns", _isolation.CLONE_NEWIPC),
    ("mountns", _isolation.CLONE_NEWNS),
    ("netns", _isolation.CLONE_NEWNET),
)


def read_spec(fd: int, trusted: bool = False) -> dict[str, Any]:
    """The job spec the host writes to `fd` (the whole pipe, then EOF); `trusted`: only the host could write to
    it (no size and depth checks)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    data = b"".join(chunks)
    spec = json.loads(data) if trusted else _protocol.parse(data)
    if spec is None:
        raise ValueError("malformed job spec")
    return spec


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        _isolation.prctl(_isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        if parent and os.getppid() != parent:  # the parent died before the death signal was armed
            os._exit(1)


def main(role: str, parent: int, inherited: list[str] | None = None) -> None:
    """Entry point with the spec on fd 3 and the host's result pipe on fd 4; `role` is ``launch`` or ``bwrap``."""
    os.closerange(RESULT_FD + 1, 1 << 20)  # nothing the host left inheritable reaches the job
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _die_with_parent(parent)
    code = 1
    try:
        spec = read_spec(SPEC_FD)
        sys.path[:] = spec["sys_path"]
        _child.drop_stubs()
        if role == "bwrap":
            applied = ["bwrap", "pidns", "ipcns", "utsns", "mountns", "proc"]
            applied += [] if spec["limits"]["network"] else ["netns"]
            code = monitor(spec, applied, own_pidns=True)
        else:
            code = launch(spec, list(inherited or []))
    except BaseException as exc:
        with contextlib.suppress(Exception):
            _protocol.send(RESULT_FD, {"status": "error", "error": f"sandbox setup failed: {exc!r}"})
    finally:
        os._exit(code)


def _unshare(network: bool, mounts: bool, inherited: list[str]) -> list[str]:
    applied: list[str] = []
    if not sys.platform.startswith("linux"):
        return applied
    if not _isolation.is_root() and "userns" not in inherited and mounts:
        with contextlib.suppress(OSError):
            _isolation.enter_userns()
            applied.append("userns")
    for name, flag in NAMESPACES:
        if name in inherited:
            continue
        if name == "mountns" and not mounts:
            continue
        if name == "netns" and (network or "netns" in inherited):
            continue
        with contextlib.suppress(OSError):
            _isolation.unshare(flag)
            applied.append(name)
    return applied


def launch(spec: dict[str, Any], inherited: list[str]) -> int:
    """Create the job's namespaces, fork the monitor into them and wait for it."""
    applied = [*inherited, *_unshare(spec["limits"]["network"], spec.get("mounts") is not None, inherited)]
    if "mountns" not in applied:
        spec["mounts"] = None
    me = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the monitor
        code = 1
        try:
            _die_with_parent(me if "pidns" not in applied else 0)
            code = monitor(spec, applied, own_pidns="pidns" in applied)
        finally:
            os._exit(code)
    os.close(RESULT_FD)
    _, status = os.waitpid(pid, 0)
    return 0 if os.waitstatus_to_exitcode(status) == 0 else 1


def tmpfs_options(limits: dict[str, Any]) -> str:
    """Mount options of the job's private tmpfs dirs: its size and inode limits."""
    return f"size={int(limits['disk_mb'])}m,nr_inodes={int(limits['max_files'])}"


def mount_private(plan: dict[str, list[str]], limits: dict[str, Any], applied: list[str]) -> None:
    """Mount the job's private file systems (in its own mount namespace); appends the measures to `applied`."""
    plan = {root: keep for root, keep in plan.items() if os.path.isdir(root)}
    proc = "pidns" in applied and "proc" not in applied
    applied += _isolation.apply_mounts(plan, tmpfs_options(limits), proc=proc)


def prepare_workdir(spec: dict[str, Any], applied: list[str], mounted: bool = False) -> None:
    """Mount the job's private file systems (if it has a mount namespace and they are not `mounted` yet) and fill
    its work dir; appends the measures applied to `applied`."""
    if spec.get("mounts") is None:  # no mount namespace: the host made the work dir on its disk
        return
    if not mounted:
        mount_private(spec["mounts"], spec["limits"], applied)
    workdir, uid = spec["workdir"], spec.get("uid")
    os.mkdir(workdir, mode=0o700)  # in the job's fresh /tmp
    files = spec.pop("files", {})
    if not files:
        if uid is not None:
            os.chown(workdir, uid, uid)
        return
    for name, data in files.items():
        path = os.path.join(workdir, os.path.normpath(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
    if uid is not None:
        for root, dirs, names in os.walk(workdir):
            for entry in [root, *(os.path.join(root, n) for n in dirs + names)]:
                os.chown(entry, uid, uid)


def _kill_all(pid: int, uid: int | None, own_pidns: bool) -> None:
    if own_pidns:  # everything in the namespace but ourselves (and bwrap's init, which exits with us)
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if uid is not None:
        _isolation.reap_uid(uid)


def monitor(spec: dict[str, Any], applied: list[str], own_pidns: bool) -> int:
    """Fork the job, watch it until it exits or its deadline, and report its outcome on the result pipe."""
    start = time.monotonic()
    prepare_workdir(spec, applied)
    _seccomp.program()  # built here, once: the job only installs it
    value_r, value_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the job
        os.dup2(value_w, 3)
        os.closerange(4, 1 << 20)  # the result pipe (and everything else) stays with the monitor
        _child.run_job(spec, 3)
    os.close(value_w)
    return watch(pid, value_r, spec, applied, own_pidns, start)


def watch(pid: int, value_r: int, spec: dict[str, Any], applied: list[str], own_pidns: bool, start: float) -> int:
    """Watch job `pid` until it exits or its deadline, and report its outcome on the result pipe."""
    limits, uid = spec["limits"], spec.get("uid")
    buf = bytearray()
    sel = selectors.DefaultSelector()
    sel.register(value_r, selectors.EVENT_READ)
    pidfd = os.pidfd_open(pid)
    sel.register(pidfd, selectors.EVENT_READ)
    deadline, drain_until = start + limits["timeout"], float("inf")
    timed_out, status, usage, reported = False, None, None, False
    while True:
        now = time.monotonic()
        if status is None and now >= deadline:
            timed_out = True
            _kill_all(pid, uid, own_pidns)
            deadline = float("inf")
        if status is not None and now >= drain_until:
            break
        events = sel.select(timeout=max(0.0, min(deadline, drain_until, now + 1.0) - now))
        for key, _ in events:
            if key.fd == pidfd:
                sel.unregister(pidfd)
                _, status, usage = os.wait4(pid, 0)
                _kill_all(pid, uid, own_pidns)  # the job is its main process: stragglers die with it
                drain_until = time.monotonic() + DRAIN_GRACE
                continue
            data = os.read(value_r, 1 << 20)
            if not data:
                sel.unregister(value_r)
                if status is not None:
                    drain_until = 0.0
                continue
            if len(buf) <= _protocol.RESULT_CAP:
                buf += data
            if not reported and b"\n" in buf:
                reported = True
                first = _protocol.parse(bytes(buf[: buf.index(b"\n")]))
                job_applied = first.get("applied") if first else None
                if isinstance(job_applied, list):
                    applied += [str(x) for x in job_applied]
                _protocol.send(RESULT_FD, {"isolation": applied})
        if status is not None and value_r not in sel.get_map():
            break
    sel.close()
    os.close(pidfd)
    os.close(value_r)
    assert status is not None and usage is not None
    result = outcome(status, bytes(buf), timed_out, usage.ru_utime + usage.ru_stime, limits)
    result.setdefault("peak_rss_kb", usage.ru_maxrss)
    result["isolation"] = applied
    _protocol.send(RESULT_FD, result)
    return 0


def outcome(status: int, data: bytes, timed_out: bool, cpu: float, limits: dict[str, Any]) -> dict[str, Any]:
    """The job's result, derived from its exit status; the job's own message only supplies value or error text."""
    out: dict[str, Any] = {"exit_code": None, "signal": None, "cpu_time": cpu}
    lines = [line for line in data.split(b"\n")[1:] if line.strip()]
    msg = _protocol.parse(lines[0]) if len(lines) == 1 else None
    if msg is not None:
        out["peak_rss_kb"] = _protocol.as_int(msg.get("peak_rss_kb"))
    text = _protocol.as_str((msg or {}).get("error"))
    if os.WIFSIGNALED(status):
        out["signal"] = os.WTERMSIG(status)
    else:
        out["exit_code"] = os.waitstatus_to_exitcode(status)
    code = out["exit_code"]
    if timed_out:
        out.update(status="timeout", error=f"wall-clock timeout of {limits['timeout']} s exceeded")
    elif out["signal"] == signal.SIGXCPU or (out["signal"] == signal.SIGKILL and cpu >= limits["cpu_seconds"]):
        out.update(status="timeout", error=f"CPU time limit of {limits['cpu_seconds']} s exceeded")
    elif out["signal"] is not None:
        out.update(status="killed", error=f"killed by signal {signal.Signals(out['signal']).name}")
    elif len(data) > _protocol.RESULT_CAP:
        out.update(status="error", error=f"return value exceeds {_protocol.RESULT_CAP} bytes")
    elif code == _child.EXIT_OK and msg is not None and "value" in msg:
        out.update(status="ok", return_value=msg["value"], value_repr=_protocol.as_str(msg.get("value_repr")))
    elif code == _child.EXIT_OK and lines:
        out.update(status="error", error="malformed result from the job (bad JSON, too deep or extra data)")
    elif code == _child.EXIT_MEMORY:
        out.update(status="memory", error=text or "MemoryError: address-space limit reached")
    elif code in (_child.EXIT_ERROR, _child.EXIT_SETUP) and text:
        out.update(status="error", error=text)
    else:
        out.update(status="error", error=f"exited with code {code} before reporting a result")
    return out
