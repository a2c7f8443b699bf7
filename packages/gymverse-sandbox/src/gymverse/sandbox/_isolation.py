"""Kernel-level isolation primitives for a sandboxed job: namespaces, private mounts, rlimits, privilege drop.

The launcher (`_monitor`) composes them; the parent only uses `probe`, `needed_paths` and `plan_masks` to decide
what to ask for. Linux only; elsewhere only rlimits and a session apply.

Why each mechanism:

* A fresh unprivileged uid per job (when we are root). Root ignores ``RLIMIT_NPROC`` and can write anywhere; a
  uid no other process uses makes ``RLIMIT_NPROC`` a per-job process/thread cap.
* A PID namespace whose init is our monitor (fresh jobs) or the pool worker's zygote (pool jobs, one at a time):
  never untrusted code, never a uid change. When it exits or dies, the kernel kills every process in it, whatever
  uid or session they moved to; the zygote also kills them all (``kill(-1)``) after each job. The monitor keeps
  ``PR_SET_PDEATHSIG`` (a uid switch would clear it), so the chain host -> launcher -> monitor -> job breaks
  downwards whichever link dies. A fresh ``/proc`` shows the job only its namespace.
* An IPC namespace per job: SysV shared memory and message queues die with the job and are seen by no other job.
* A network namespace: the child sees only a down loopback device.
* A mount namespace per job with size- and inode-limited tmpfs over ``/tmp``, ``/var/tmp``, ``/dev/shm`` and over
  any directory the job uid could not traverse (e.g. ``/root`` when the interpreter lives in ``/root/.pyenv``);
  the paths the job needs are bind-mounted back read-only. Everything the job writes disappears with its
  namespace: nothing is walked or deleted by path.
* A minimal file system: every host directory but the system's (the host's home dirs, checkouts, ``/etc`` but
  the few files the C library reads, ``/var`` but its temp dirs) is covered the same way, so a job reads its
  interpreter, its packages, the paths it was given and its work dir, not the host's world-readable files.
* ``PR_SET_NO_NEW_PRIVS`` so set-uid binaries cannot regain root, then a seccomp filter (`_seccomp`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import stat
import sys
import time

# Not `typing.TYPE_CHECKING`: no `typing` in a zygote (see `_child`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_NOEXEC = 0x8
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38

#: World-writable places every unprivileged process could otherwise write to.
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")
#: Top-level directories a job keeps seeing: the system's programs and libraries, devices, /proc, /sys, /run
#: (its lock dir is a temp dir) and the temp dirs (private to each job anyway).
SYSTEM_DIRS = frozenset(
    {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "dev", "proc", "sys", "run", "tmp", "var", "etc"}
)
#: What of /var a job keeps: its temp dirs (private to each job).
VAR_KEEP = frozenset({"tmp", "lock", "run"})
#: The files of /etc the interpreter and the C library read (the rest, /etc/passwd included, is hidden).
ETC_KEEP = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types")
#: uids handed to jobs when we are root: far above any real account, one fresh uid per job.
UID_BASE = 1_500_000_000
UID_SPAN = 1 << 24

_PROBE: dict[str, bool] | None = None


@functools.cache
def _libc() -> ctypes.CDLL:
    # One handle per process, its symbols resolved once: a process that forks jobs calls this first, so a forked
    # job inherits it instead of paying dlopen and ctypes' symbol set-up (~0.3 ms of copy-on-write work).
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("unshare", "setns", "mount", "umount2", "prctl"):
        getattr(libc, name)
    return libc


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """`unshare(2)` (Python 3.11 has no `os.unshare`)."""
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    """`setns(2)` (Python 3.11 has no `os.setns`)."""
    _check(_libc().setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """`mount(2)`."""

    def enc(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    ret = _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {target}")


def unmount(target: str) -> None:
    """`umount2(target, MNT_DETACH)`: detach a mount and everything mounted below it."""
    _check(_libc().umount2(os.fsencode(target), ctypes.c_int(MNT_DETACH)), f"umount {target}")


def remount_tmpfs(roots: list[str], tmpfs_options: str) -> None:
    """Give already mounted tmpfs dirs new size/inode limits."""
    for root in roots:
        mount(None, root, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, tmpfs_options)


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


def host_data_dirs(keep: list[str]) -> set[str]:
    """The host's own directories a job has no business reading, even where they are world-readable: every
    top-level directory but the system ones (`SYSTEM_DIRS`: /home, /root, /srv, /opt, a checkout...), `/etc`
    (`ETC_KEEP` is bound back) and `/var` but its temp dirs; none that is itself kept or inside a kept path."""
    found: set[str] = set()
    for parent, allowed in (("/", SYSTEM_DIRS), ("/var", VAR_KEEP)):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            if name not in allowed and os.path.isdir(path) and not os.path.islink(path):
                found.add(path)
    if os.path.isdir("/etc") and not os.path.islink("/etc"):
        found.add("/etc")
    return {d for d in found if not any(d == k or d.startswith(k.rstrip("/") + "/") for k in keep)}


def plan_masks(keep: list[str], minimal: bool = True) -> dict[str, list[str]]:
    """Directories to cover with tmpfs, each with the paths under it to bind back at the same place; `minimal`:
    also the host's data directories (`host_data_dirs`), so a job sees the system, its interpreter and packages,
    the paths it was given and its own work dir, not the host's files."""
    # realpath: /var/lock is usually a symlink to /run/lock, and mounting over a symlink follows it anyway.
    roots: set[str] = {os.path.realpath(d) for d in TEMP_DIRS if os.path.isdir(d)}
    if minimal:
        keep = [*keep, *(f for f in ETC_KEEP if os.path.exists(f))]
        roots |= host_data_dirs(keep)
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


def split_plan(plan: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """A mount plan's masks (dirs the job could not traverse, covered read-only) and its temp dirs (writable)."""
    temps = {os.path.realpath(d) for d in TEMP_DIRS}
    masks = {root: keep for root, keep in plan.items() if root not in temps}
    return masks, {root: keep for root, keep in plan.items() if root in temps}


def cover(plan: dict[str, list[str]], tmpfs_options: str, read_only: bool = False) -> None:
    """Cover each planned dir with a limited tmpfs and bind its kept paths back read-only; `read_only`: then make
    the tmpfs itself read-only (a mask that holds nothing but those mount points)."""
    # Open every kept path before masking anything: afterwards the originals are unreachable by name.
    fds = {p: os.open(p, os.O_PATH) for paths in plan.values() for p in paths}
    try:
        for root, paths in plan.items():
            mode = "0755" if read_only else "1777"
            mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},{tmpfs_options}")
            for path in paths:
                if os.path.isdir(f"/proc/self/fd/{fds[path]}"):
                    os.makedirs(path, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                    open(path, "a").close()
                mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
                _remount_read_only(path)
            if read_only:  # the superblock, not just this mount: no copy of it in any namespace is writable
                mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, tmpfs_options)
    finally:
        for fd in fds.values():
            os.close(fd)


def mount_proc() -> bool:
    """Mount a fresh ``/proc`` (for the caller's PID namespace); whether that worked."""
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:  # e.g. a container that over-mounts parts of /proc forbids new proc mounts in a user namespace
        return False
    return True


def apply_mounts(plan: dict[str, list[str]], tmpfs_options: str, proc: bool) -> list[str]:
    """In a private mount namespace: cover each planned dir with a limited tmpfs, bind its kept paths back
    read-only, and (in a new PID namespace) mount a fresh ``/proc``; returns the measures applied."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    cover(plan, tmpfs_options)
    applied = ["private-tmp"]
    if proc and mount_proc():
        applied.append("proc")
    return applied


def _remount_read_only(path: str) -> None:
    # A user namespace may only remount with the original's locked flags kept, so carry them over.
    keep = os.statvfs(path).f_flag & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC)
    with contextlib.suppress(OSError):
        mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)


def enter_userns() -> None:
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
    result = {"userns": False, "netns": False, "mountns": False, "pidns": False, "ipcns": False}
    if sys.platform.startswith("linux"):
        probes = (
            ("netns", CLONE_NEWNET),
            ("mountns", CLONE_NEWNS),
            ("pidns", CLONE_NEWPID),
            ("ipcns", CLONE_NEWIPC),
        )
        for name, flags in probes:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                code = 1
                try:
                    if not is_root():
                        enter_userns()
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
    cap(resource.RLIMIT_NOFILE, int(limits["max_open_files"]))
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


def live_pids_of(uid: int) -> list[int]:
    """The pids of `uid`'s processes that have not yet died (zombies excluded)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f if b":" in line)
        except OSError:
            continue  # it ended while we looked
        if int(fields[b"Uid"].split()[0]) == uid and not fields[b"State"].strip().startswith(b"Z"):
            pids.append(int(entry))
    return pids


def reap_uid_until_gone(uid: int, settle: float) -> bool:
    """`reap_uid` until no live process of `uid` is left or `settle` seconds passed; whether none is left."""
    # A killed launcher's PID namespace is torn down asynchronously: a fork bomb's hundreds of processes can still
    # be running when the launcher's exit is seen, so the job's end waits for them, not for the launcher.
    deadline = time.monotonic() + settle
    while True:
        reap_uid(uid)
        if not live_pids_of(uid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
