"""Kernel-level isolation for a sandboxed child: namespaces, private mounts, rlimits, privilege drop.

Everything here runs *inside the child* before untrusted code starts (except `probe` and `plan_masks`, which the
parent uses to decide what to ask for). Linux only; on other systems only rlimits and a session are applied.

Why each mechanism:

* A fresh unprivileged uid per job (when we are root). Root ignores ``RLIMIT_NPROC`` and can write anywhere, so a
  root child could fork-bomb the machine and write into the repo. A uid no other process uses makes
  ``RLIMIT_NPROC`` a per-job process/thread cap and lets the supervisor kill *every* process of the job
  (``kill(-1)`` as that uid), including ones that left the process group with ``setsid``.
* A network namespace (``unshare(CLONE_NEWNET)``): the child sees only a down loopback device.
* A mount namespace with tmpfs over ``/tmp``, ``/var/tmp``, ``/dev/shm`` and over any directory the unprivileged
  uid could not traverse (e.g. ``/root`` when the interpreter lives in ``/root/.pyenv``); the paths the child needs
  (interpreter, ``sys.path``, the work dir) are bind-mounted back at the same place. Writes to world-writable temp
  dirs land in a private tmpfs that disappears with the job; everything else in those dirs is hidden.
* ``PR_SET_NO_NEW_PRIVS`` so set-uid binaries cannot regain root; ``PR_SET_PDEATHSIG`` so the child dies with
  its supervisor.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import stat
import sys
from collections.abc import Sequence
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

#: World-writable places every unprivileged process could otherwise write to.
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
#: uids handed to jobs when we are root: far above any real account, one fresh uid per job.
UID_BASE = 1_500_000_000
UID_SPAN = 1 << 24

_PROBE: dict[str, bool] | None = None


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """`unshare(2)` (Python 3.11 has no `os.unshare`)."""
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """`mount(2)`."""

    def enc(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    ret = _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {target}")


def prctl(option: int, arg: int) -> None:
    """`prctl(2)` with one argument."""
    _check(_libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), "prctl")


def is_root() -> bool:
    """Whether we could hand jobs a different uid."""
    return os.geteuid() == 0


def fresh_uid() -> int:
    """A uid no account or concurrent job is likely to use (random in a high, unassigned range)."""
    return UID_BASE + int.from_bytes(os.urandom(3), "little") % UID_SPAN


def _traversable_by_others(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & stat.S_IXOTH)
    except OSError:
        return False


def needed_paths(extra: list[str]) -> list[str]:
    """Paths the child must still read after dropping privileges: interpreter, `sys.path`, `extra`."""
    cands = [sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    cands += [p for p in sys.path if p] + list(extra)
    # A whole temp dir or "/" (e.g. a script run from /tmp puts /tmp on sys.path) is never kept: it would swallow
    # the job's own work dir and expose the host's temp files.
    never = {"/", *(os.path.realpath(d) for d in TEMP_DIRS)}
    out: list[str] = []
    real = {os.path.realpath(p) for p in cands if p and os.path.exists(p)} - never
    for path in sorted(real, key=len):
        if not any(path == q or path.startswith(q.rstrip("/") + "/") for q in out):
            out.append(path)
    return out


def plan_masks(keep: list[str]) -> dict[str, list[str]]:
    """Directories to cover with tmpfs, each with the paths under it to bind back at the same place."""
    # realpath: /var/lock is usually a symlink to /run/lock, and mounting over a symlink follows it anyway.
    roots: set[str] = {os.path.realpath(d) for d in TEMP_DIRS if os.path.isdir(d)}
    for path in keep:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            anc = "/" + "/".join(parts[:i])
            if not _traversable_by_others(anc):
                roots.add(anc)
                break
    # A mask inside another mask is redundant: the outer tmpfs already hides it and binds back what is kept.
    top = sorted(r for r in roots if not any(r != o and r.startswith(o.rstrip("/") + "/") for o in roots))
    plan: dict[str, list[str]] = {}
    for root in top:
        plan[root] = [p for p in keep if p.startswith(root.rstrip("/") + "/")]
    return plan


def apply_mounts(plan: dict[str, list[str]], writable: Sequence[str] = ()) -> None:
    """Enter a mount namespace, cover each planned dir with tmpfs and bind its kept paths back (read-only but
    `writable`), so nothing the job or a temp-dir wipe does can change the host's interpreter or code."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Open every kept path before masking anything: afterwards the originals are unreachable by name.
    fds = {p: os.open(p, os.O_PATH) for paths in plan.values() for p in paths}
    try:
        for root, paths in plan.items():
            mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
            for path in paths:
                if os.path.isdir(f"/proc/self/fd/{fds[path]}"):
                    os.makedirs(path, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    open(path, "a").close()
                mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
                if path not in writable:
                    _remount_read_only(path)
    finally:
        for fd in fds.values():
            os.close(fd)


def _remount_read_only(path: str) -> None:
    # A user namespace may only remount with the original's locked flags kept, so carry them over.
    keep = os.statvfs(path).f_flag & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC)
    with contextlib.suppress(OSError):  # the wipe below never crosses a mount either
        mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)


def _enter_userns() -> None:
    # Unprivileged path: a user namespace gives us the capabilities to create net/mount namespaces.
    uid, gid = os.getuid(), os.getgid()
    # A process that once changed uid is non-dumpable, which makes its /proc/self/*_map files root-owned.
    prctl(PR_SET_DUMPABLE, 1)
    unshare(CLONE_NEWUSER)
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def probe() -> dict[str, bool]:
    """Which namespaces this machine lets us create (forks a throwaway child once; cached)."""
    global _PROBE
    if _PROBE is not None:
        return dict(_PROBE)
    result = {"userns": False, "netns": False, "mountns": False}
    if sys.platform.startswith("linux"):
        for name, flags in (("netns", CLONE_NEWNET), ("mountns", CLONE_NEWNS)):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                code = 1
                try:
                    if not is_root():
                        _enter_userns()
                    unshare(flags)
                    if flags == CLONE_NEWNS:
                        mount(None, "/", None, MS_REC | MS_PRIVATE)
                        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            result[name] = os.waitstatus_to_exitcode(status) == 0
        result["userns"] = not is_root() and (result["netns"] or result["mountns"])
    _PROBE = result
    return dict(result)


def _count_user_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        count += int(line.split()[1]) == uid
                        break
    return count


def set_limits(limits: dict[str, Any], uid: int | None) -> None:
    """Apply the rlimits of a job (call before dropping privileges so hard limits can be lowered)."""

    def cap(res: int, value: int) -> None:
        resource.setrlimit(res, (value, value))

    cpu = max(1, int(limits["cpu_seconds"] + 0.999))
    # Soft limit raises SIGXCPU (reported as a CPU timeout); the hard one a second later is a SIGKILL backstop.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    cap(resource.RLIMIT_AS, int(limits["memory_mb"]) * 1024 * 1024)
    cap(resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * 1024 * 1024)
    cap(resource.RLIMIT_CORE, 0)
    nproc = int(limits["max_processes"])
    if uid is None:
        # Same uid as the caller: the kernel counts all its processes, so grant the job on top of those.
        nproc += _count_user_processes(os.getuid())
    cap(resource.RLIMIT_NPROC, nproc)


def drop_privileges(uid: int) -> None:
    """Become `uid` (group `uid`, no supplementary groups) for good."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def isolate(spec: dict[str, Any]) -> list[str]:
    """Apply every isolation measure `spec` asks for; returns the ones actually in force."""
    applied: list[str] = []
    with contextlib.suppress(OSError):
        os.setsid()
    applied.append("session")
    linux = sys.platform.startswith("linux")
    uid = spec.get("uid")
    if linux:
        with contextlib.suppress(OSError):
            prctl(PR_SET_PDEATHSIG, 9)
    want_net = not spec["limits"]["network"]
    want_mounts = bool(spec.get("mounts"))
    if linux and (want_net or want_mounts) and uid is None and not is_root() and not spec.get("inherited"):
        try:
            _enter_userns()
            applied.append("userns")
        except OSError:
            want_net = want_mounts = False
    inherited = spec.get("inherited", [])
    applied += inherited
    if "netns" in inherited:
        want_net = False
    if "private-tmp" in inherited:
        want_mounts = False
    if linux and want_net:
        try:
            unshare(CLONE_NEWNET)
            applied.append("netns")
        except OSError:
            pass
    if linux and want_mounts:
        try:
            apply_mounts(spec["mounts"], spec.get("writable", ()))
            applied.append("private-tmp")
        except OSError:
            pass
    os.chdir(spec["workdir"])
    set_limits(spec["limits"], uid)
    applied.append("rlimits")
    if uid is not None:
        drop_privileges(int(uid))
        applied.append(f"uid:{uid}")
    if linux:
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            applied.append("no-new-privs")
        except OSError:
            pass
    return applied


def reap_uid(uid: int) -> None:
    """SIGKILL every process owned by `uid` (a job's private uid) by signalling -1 as that uid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, 9)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def isolate_worker(network: bool, mounts: dict[str, list[str]] | None) -> list[str]:
    """Enter the namespaces once for a pool worker; its forked job children inherit them."""
    applied: list[str] = []
    if not sys.platform.startswith("linux"):
        return applied
    if not is_root():
        try:
            _enter_userns()
            applied.append("userns")
        except OSError:
            return applied
    if not network:
        with contextlib.suppress(OSError):
            unshare(CLONE_NEWNET)
            applied.append("netns")
    if mounts:
        with contextlib.suppress(OSError):
            apply_mounts(mounts)
            applied.append("private-tmp")
    return applied


def wipe_temp_dirs() -> None:
    """Empty the (worker-private tmpfs) temp dirs between jobs so no job sees another's leftovers."""
    for root in TEMP_DIRS:
        with contextlib.suppress(OSError):
            dev = os.lstat(root).st_dev
            for name in os.listdir(root):
                _remove_on_device(os.path.join(root, name), dev)


def _remove_on_device(path: str, dev: int) -> None:
    # Kept host paths are bind-mounted inside the tmpfs: deleting through them would delete the host's files.
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if st.st_dev != dev or os.path.ismount(path):
            return
        if stat.S_ISDIR(st.st_mode):
            for name in os.listdir(path):
                _remove_on_device(os.path.join(path, name), dev)
            os.rmdir(path)
        else:
            os.unlink(path)
