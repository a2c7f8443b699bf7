"""A zygote: a pre-imported interpreter that supervises one pool worker's jobs and never sees any job's data.

    host --socket: 5 pipe ends--> zygote (pid 1 of the worker's PID namespace) --fork, ahead of time--> job

The zygote forks each job process *before* its job exists, so the fork is off the job's path and the new process
holds nothing but the preloaded modules. It also creates that process's IPC and mount namespaces itself (enters
fresh ones, mounts the job's limited tmpfs dirs, forks the process into them and returns to its own with
``setns``), so the job process has nothing left to set up; the read-only masks over dirs a job could not traverse
and ``/proc`` are mounted once, in the zygote's own mount namespace that every job's copies. When the job comes,
the host sends the zygote six pipe ends (SCM_RIGHTS): the job's spec, stdout, stderr, value and stdin pipes, which
go on to the waiting job process untouched, and a status pipe the zygote keeps. The job process reads its spec from the
host's pipe itself, drops to its own uid and runs the code (`_child`). Its value goes straight to the host; the
zygote reports only what it observed itself: the job's exit status, rusage, and whether it hit its deadline. So no
job's source, files, output or return value ever exists in the zygote's memory, nor, therefore, in any later
job's.

The zygote is pid 1 of the worker's PID namespace. While a job runs it already forks the next job's process (root,
waiting, holding nothing). When the job's main process exits, and nothing else of the job is left (our only child
is that next process: pid 1 adopts every orphan), the result is reported at once; otherwise, and when the deadline
passes or the host closes the status pipe (host death, Ctrl-C, cancellation), it kills every other process in the
namespace (``kill(-1)`` from pid 1 reaches nothing outside it; the next job's process dies too and is forked
again), reaps them all and only then reports, so every process of a job is gone before its result exists. The
zygote exits when the host's socket closes, and when it dies for any reason the kernel kills everything in its
namespace.
"""

from __future__ import annotations

import _signal
import _socket
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import time

from gymverse.sandbox import _child, _isolation, _monitor, _protocol, _seccomp

# Not `typing.TYPE_CHECKING`: no `typing` in a zygote (see `_child`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The zygote's command line (argv: gymverse package dir, socket fd). It imports only what jobs need: every module
#: here makes each job's fork and exit dearer (page tables), so host-side code stays in `pool`.
BOOT = _child.STUBS + "from gymverse.sandbox._zygote import main; main(int(sys.argv[2]))"
#: Pipe ends the host sends per job: spec (read), stdout, stderr, value (write), stdin (read: ``/dev/null``, or an
#: env host's requests) go on to the job; status stays.
JOB_FDS = 6
#: Of those, the ones the job process gets.
JOB_PROCESS_FDS = JOB_FDS - 1
#: Where the prestarted job process keeps its control socket until its job arrives.
CTL_FD = 3
#: The namespaces each job gets of its own, in the order `SandboxResult.isolation` names them.
NAMESPACES = ((_isolation.CLONE_NEWIPC, "ipcns"), (_isolation.CLONE_NEWNS, "mountns"))
#: Their files under ``/proc/<pid>/ns``.
NS_FILES = {_isolation.CLONE_NEWIPC: "ipc", _isolation.CLONE_NEWNS: "mnt"}
#: A job process waiting for its job: pid, pidfd, control socket, fds of its namespaces.
Standby = tuple[int, int, _socket.socket, list[int]]
#: Options of the read-only tmpfs over dirs a job could not traverse: it only holds the mount points of the paths
#: bound back.
MASK_TMPFS = "size=1m,nr_inodes=4096"


def main(sock_fd: int) -> None:
    """Zygote loop (entry point of the exec'd zygote; `sock_fd` is its end of the host's socket)."""
    sock = socket.socket(fileno=sock_fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    init = json.loads(sock.recv(1 << 20))
    sys.path[:] = init["sys_path"]
    _child.drop_stubs()
    for name in init.get("preload", []):
        importlib.import_module(name)
    _seccomp.program()  # built once here; every forked job only installs it
    # What every job's environment starts from (see `_child.run_job`): set once here, not per job.
    os.environ.clear()
    os.environ.update(_child.BASE_ENV)
    # Forked children only read the preloaded objects: keep the collector from touching (and so copying) them.
    gc.collect()
    gc.freeze()
    inherited = ["zygote", *_namespaces(init["network"])]
    if _own_pid_namespace():
        inherited.append("pidns")
    ahead = init.get("mounts")  # the pool's mount plan and default limits, or None: no mount namespaces
    base = _base_namespaces(ahead is not None)
    if ahead is not None:
        in_own = _isolation.CLONE_NEWNS in base
        ahead["temps"] = _worker_mounts(ahead["plan"], inherited) if in_own else None
        ahead["options"] = _monitor.tmpfs_options(ahead["limits"])
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # inherited by every job process; we never exec anything ourselves
            _isolation.prctl(_isolation.PR_SET_NO_NEW_PRIVS, 1)
            inherited.append("no-new-privs")
    sock.sendall(json.dumps({"ready": True, "isolation": inherited}).encode())
    # As pid 1 that can list its children we can tell when a job left nothing behind, and so fork the next job's
    # process while this job runs (see `_supervise_job`); otherwise only once it is over.
    early = os.getpid() == 1 and _children() is not None
    job = _prestart(_prepare(inherited, ahead, base), base)
    while True:
        data, fds = _protocol.recv_fds(sock, JOB_FDS, _protocol.JOB_HEAD.size + 1)
        if len(data) != _protocol.JOB_HEAD.size or len(fds) != JOB_FDS:
            return  # the host is gone (or spoke nonsense): stop, and everything in our namespace dies with us
        timeout, uid = _protocol.JOB_HEAD.unpack(data)
        start = time.monotonic()
        pid, pidfd, ctl, held = job
        with contextlib.suppress(OSError):  # a dead job process shows up as its exit status below
            _protocol.send_fds(ctl, b"J", fds[:JOB_PROCESS_FDS])
        ctl.close()
        for fd in fds[:JOB_PROCESS_FDS]:
            os.close(fd)
        spare = _prestart(_prepare(inherited, ahead, base), base) if early else None
        report, spared = _supervise_job(
            pid, pidfd, fds[JOB_PROCESS_FDS], start + timeout, None if uid < 0 else uid, spare
        )
        with contextlib.suppress(OSError):  # the host may have given up on this job
            os.write(fds[JOB_PROCESS_FDS], report)
        os.close(fds[JOB_PROCESS_FDS])
        for fd in held:  # the job's namespaces, torn down now that its result is out rather than at its exit
            os.close(fd)
        if spare is not None and spared:
            job = spare
            continue
        if spare is not None:  # killed with the job's processes (and reaped): fork another
            os.close(spare[1])
            spare[2].close()
            for fd in spare[3]:
                os.close(fd)
        job = _prestart(_prepare(inherited, ahead, base), base)


def _supervise_job(
    pid: int, pidfd: int, status_w: int, deadline: float, uid: int | None, standby: Standby | None
) -> tuple[bytes, bool]:
    """Wait for job `pid` to exit, its deadline, or the host to close `status_w`; kill and reap every process of
    the job; return what was observed (`_protocol.JOB_REPORT`) and whether the next job's process (`standby`,
    already forked) was spared.

    It is spared only when, the job's main process reaped, our one child left is that process: every process of
    the job descends from us (pid 1 adopts the orphans; a child of ours only leaves our list of children once we
    reap it), so then the job left nothing behind. Otherwise ``kill(-1)`` kills everything in our namespace, the
    next job's process included, and we reap them all."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(status_w, 0)  # POLLERR alone: the host closed its end (died, interrupted, gave up)
    timed_out = cancelled = False
    while True:
        wait = deadline - time.monotonic()
        # Looked at even once the deadline passed: forking the next job's process may have kept us from looking
        # before a job that finished in time.
        events = poller.poll(wait * 1000 + 1 if wait > 0 else 0)
        if any(fd == pidfd for fd, _ in events):
            break
        if events:
            cancelled = True
            break
        if wait <= 0:
            timed_out = True
            break
    if timed_out or cancelled:
        _kill_job(pid, uid)
    _, status, usage = os.wait4(pid, 0)
    os.close(pidfd)
    spared = standby is not None and not (timed_out or cancelled) and _children() == [standby[0]]
    if not spared:
        _kill_job(pid, uid)  # the job is its main process: whatever it left behind dies with it
        _reap()
    report = _protocol.JOB_REPORT.pack(status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, timed_out)
    return report, spared


def _children() -> list[int] | None:
    """Our live and unreaped child processes (None: the kernel does not list them)."""
    try:
        fd = os.open("/proc/thread-self/children", os.O_RDONLY)
    except OSError:
        return None
    try:
        return [int(pid) for pid in os.read(fd, 1 << 16).split()]
    finally:
        os.close(fd)


def _kill_job(pid: int, uid: int | None) -> None:
    if os.getpid() == 1:  # everything in our PID namespace but ourselves: only this job's processes
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        return
    with contextlib.suppress(OSError):  # no PID namespace (fallback): the job's session and uid
        os.killpg(pid, signal.SIGKILL)
    if uid is not None:
        _isolation.reap_uid(uid)


def _reap() -> None:
    # As pid 1 we inherit every orphan of the job; when none is left (ECHILD) the namespace holds only us.
    # Outside a PID namespace only our own children are ours to wait for.
    flags = 0 if os.getpid() == 1 else os.WNOHANG
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, flags)[0]:
            pass


def _prepare(
    inherited: list[str], ahead: dict[str, Any] | None, base: dict[int, int]
) -> tuple[dict[int, int], list[str], dict[str, Any] | None]:
    """Create a job's IPC and mount namespaces, mount its private file systems into them, and return to our own
    (`base`). Returns the new namespaces ({kind: fd}, held until a job process is forked into them), the measures
    in force in them, and what was mounted ahead (None: the job mounts its own)."""
    applied = list(inherited)
    fresh = list(base)
    try:
        try:
            _isolation.unshare(sum(fresh))
        except OSError:
            fresh = []  # no namespaces of its own for this job (`applied` says so)
        applied += [name for kind, name in NAMESPACES if kind in fresh]
        mounted = _mount_ahead(ahead, applied) if _isolation.CLONE_NEWNS in fresh else None
        held = {kind: os.open(f"/proc/self/ns/{NS_FILES[kind]}", os.O_RDONLY) for kind in fresh}
    finally:
        for kind in fresh:  # back to our own namespaces (if that fails, we stop: the pool starts a new worker)
            _isolation.setns(base[kind], kind)
    return held, applied, mounted


def _prestart(prepared: tuple[dict[int, int], list[str], dict[str, Any] | None], base: dict[int, int]) -> Standby:
    """Fork the next job's process, ahead of its job, into the namespaces `_prepare` made for it; returns its pid,
    a pidfd, its control socket and the fds of its namespaces (kept open until its result is out, so that they are
    not torn down by its exit, before it is reported). The job process starts with nothing left to set up: work
    the zygote does is cheaper than the same work in a fresh fork, whose every write copies a page."""
    held, applied, mounted = prepared
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        for kind, fd in held.items():
            _isolation.setns(fd, kind)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the job process, still holding nothing of any job
            code = _child.EXIT_SETUP
            try:
                os.dup2(theirs.fileno(), CTL_FD)
                os.closerange(CTL_FD + 1, 1 << 20)  # the host's socket, namespace fds, the last status pipe, ...
                # stdin, and nothing of the zygote's stdout/stderr; with 0-3 taken, the job's fds arrive above them
                null = os.open(os.devnull, os.O_RDONLY)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.close(null)
                _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
                if "pidns" not in applied:  # in our PID namespace it dies with us anyway
                    _isolation.prctl(_isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
                _await_job(applied, mounted)
            finally:
                os._exit(code)
    finally:
        for kind in held:
            _isolation.setns(base[kind], kind)
        theirs.close()
    return pid, os.pidfd_open(pid), ours, list(held.values())


def _mount_ahead(ahead: dict[str, Any] | None, applied: list[str]) -> dict[str, Any] | None:
    """Mount a job's private file systems (with the pool's defaults) into the fresh mount namespace we are in;
    returns `ahead` if that worked, None if the job must mount its own when it comes."""
    if ahead is None:
        return None
    with contextlib.suppress(OSError):
        if ahead["temps"] is None:  # no masks of the worker's: the whole plan, per job
            _monitor.mount_private(ahead["plan"], ahead["limits"], applied)
        else:
            _isolation.cover(ahead["temps"], ahead["options"])
            applied.append("private-tmp")
        return ahead
    return None


def _await_job(applied: list[str], mounted: dict[str, Any] | None) -> None:
    """In the prestarted job process: wait for the job and run it."""
    sock = _socket.socket(fileno=CTL_FD)
    _, fds = _protocol.recv_fds(sock, JOB_PROCESS_FDS, 16)  # blocks until the job comes
    sock.close()
    if len(fds) != JOB_PROCESS_FDS:
        return  # the zygote is gone
    spec_fd, out_w, err_w, value_w, in_r = fds  # above 0-3 (see `_prestart`): nothing to move out of the way
    try:
        spec = _monitor.read_spec(spec_fd, trusted=True)
        sys.path[:] = spec["sys_path"]
        if "mountns" not in applied:
            spec["mounts"] = None
        ready = mounted is not None and spec["mounts"] is not None and _fit_mounts(mounted, spec, applied)
        _monitor.prepare_workdir(spec, applied, mounted=ready)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            _protocol.send(value_w, {"applied": applied})
            _protocol.send(value_w, {"error": f"sandbox setup failed: {exc!r}"})
        return
    os.dup2(in_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.dup2(value_w, 3)
    os.closerange(4, 1 << 20)
    # The zygote's rusage of the job has its peak RSS (the forked job's high-water mark starts at its own size).
    _child.run_job(spec, 3, applied, measure_rss=False, death_signal="pidns" not in applied, clean_env=True)


def _fit_mounts(mounted: dict[str, Any], spec: dict[str, Any], applied: list[str]) -> bool:
    """Make the file systems mounted ahead (`mounted`: plan, limits, temps) the job's; whether they now are. Other
    tmpfs limits: remount the job's own tmpfs dirs with them (never the worker's read-only masks); another plan
    (readable paths or `sys.path` changed): detach everything the plan mounted, in this process's namespace."""
    if spec["mounts"] != mounted["plan"]:
        for root in reversed([root for root in mounted["plan"] if os.path.isdir(root)]):
            _isolation.unmount(root)
        applied.remove("private-tmp")
        return False
    options = _monitor.tmpfs_options(spec["limits"])
    if options != _monitor.tmpfs_options(mounted["limits"]):
        own = mounted["plan"] if mounted["temps"] is None else mounted["temps"]
        _isolation.remount_tmpfs([root for root in own if os.path.isdir(root)], options)
    return True


def _base_namespaces(mounts: bool) -> dict[int, int]:
    """Move into an IPC and (if `mounts`) a mount namespace of the zygote's own: the ones each job's fresh
    namespaces are copied from, and that we return to after forking a job process into those; {kind: its fd}.
    Empty: jobs get no namespaces of their own here."""
    if not sys.platform.startswith("linux"):
        return {}
    kinds = ([_isolation.CLONE_NEWNS] if mounts else []) + [_isolation.CLONE_NEWIPC]
    for tried in (kinds, [_isolation.CLONE_NEWIPC]):
        with contextlib.suppress(OSError):
            _isolation.unshare(sum(tried))
            return {kind: os.open(f"/proc/self/ns/{NS_FILES[kind]}", os.O_RDONLY) for kind in tried}
    return {}


def _worker_mounts(plan: dict[str, list[str]], inherited: list[str]) -> dict[str, list[str]] | None:
    """In the zygote's own mount namespace, once: private propagation, the plan's masks (dirs a job could not
    traverse, with the paths it needs bound back) read-only, and, as the init of the worker's PID namespace, a
    fresh ``/proc``. Each job's mount namespace copies it and only gets its own writable temp dirs; returns those
    (the rest of the plan), or None: each job mounts the whole plan, as before.

    Only as root: there jobs run under a fresh uid without capabilities and cannot remount a read-only mask that
    every job of the worker shares. In a user namespace (non-root) a job keeps capabilities there, so each job
    keeps masks of its own."""
    if not _isolation.is_root():
        return None
    masks, temps = _isolation.split_plan(plan)
    try:
        _isolation.mount(None, "/", None, _isolation.MS_REC | _isolation.MS_PRIVATE)
        _isolation.cover({root: keep for root, keep in masks.items() if os.path.isdir(root)}, MASK_TMPFS, True)
    except OSError:
        return None  # jobs mount the whole plan over whatever got mounted here (their own copy of it)
    if "pidns" in inherited and _isolation.mount_proc():
        inherited.append("proc")
    return {root: keep for root, keep in temps.items() if os.path.isdir(root)}


def _own_pid_namespace() -> bool:
    """Continue as pid 1 of a new PID namespace (the original process just waits and dies with it); whether
    that worked. Our jobs are then alone in it with us, and die with us."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        _isolation.unshare(_isolation.CLONE_NEWPID)
    except OSError:
        return False
    pid = os.fork()
    if pid == 0:  # the zygote proper
        _isolation.prctl(_isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        return True
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    os._exit(0)


def _namespaces(network: bool) -> list[str]:
    # The network namespace is shared by the zygote's jobs (creating one costs milliseconds); the PID namespace
    # is the worker's; IPC and mount namespaces are per job. Non-root: a user namespace first, which grants the
    # rest.
    applied: list[str] = []
    if not sys.platform.startswith("linux"):
        return applied
    if not _isolation.is_root():
        try:
            _isolation.enter_userns()
            applied.append("userns")
        except OSError:
            return applied
    if not network:
        with contextlib.suppress(OSError):
            _isolation.unshare(_isolation.CLONE_NEWNET)
            applied.append("netns")
    return applied
