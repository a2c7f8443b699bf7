"""A seccomp filter for sandboxed jobs: deny the system calls a job never needs and an escape would.

The BPF program is built by libseccomp (``libseccomp.so.2``, Debian's ``libseccomp2``, present wherever systemd or
apt is) through ctypes, once per process, and exported as raw BPF; each job then installs it with
``prctl(PR_SET_SECCOMP)`` as the last step of its confinement, after no-new-privs, in every launcher (bubblewrap,
the ctypes launcher and pool zygotes alike). The monitor that mounts the job's file system is not filtered: it
needs ``mount``; the job never does. Where libseccomp is missing the job runs without the filter and its
isolation list says so (no ``seccomp`` entry).

Denied (``EPERM``): namespace creation and entry (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag),
io_uring, the kernel keyring, ``ptrace`` and cross-process memory access, BPF and perf events, userfaultfd,
mounting and the new mount API, ``pivot_root``/``chroot``, kernel modules, kexec, swap, reboot, the kernel log,
accounting, quotas, file handles, time setting and raw port I/O. ``clone3`` answers ``ENOSYS`` (its flags live in
memory a filter cannot read), which makes the C library fall back to ``clone``, whose flags are checked. System
calls of another architecture (x32, i386 via ``int 0x80``) kill the job: libseccomp's default for a foreign arch.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

#: System calls no job needs, each answered with EPERM.
DENIED = (
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "swapon", "swapoff", "reboot", "syslog", "acct", "quotactl", "quotactl_fd",
    "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "uselib", "nfsservctl", "vhangup",
)  # fmt: skip
#: ``clone`` flags that create a namespace (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
#: NEWNET): a clone with any of them set is denied.
NAMESPACE_FLAGS = (0x80, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)

_ACT_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _library() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]  # fmt: skip
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def _build(lib: ctypes.CDLL) -> bytes:
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:

        def rule(name: str, action: int, cmps: list[_ArgCmp]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a system call of this architecture (e.g. iopl on arm64)
            arr = (_ArgCmp * max(1, len(cmps)))(*cmps)
            ret = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
            if ret != 0:
                raise OSError(-ret, f"seccomp rule for {name}: {os.strerror(-ret)}")

        for name in DENIED:
            rule(name, _act_errno(errno.EPERM), [])
        for flag in NAMESPACE_FLAGS:
            rule("clone", _act_errno(errno.EPERM), [_ArgCmp(0, _CMP_MASKED_EQ, flag, flag)])
        rule("clone3", _act_errno(errno.ENOSYS), [])
        read_fd, write_fd = os.pipe()
        try:
            ret = lib.seccomp_export_bpf(ctx, write_fd)
            os.close(write_fd)
            write_fd = -1
            if ret != 0:
                raise OSError(-ret, f"seccomp_export_bpf: {os.strerror(-ret)}")
            chunks = []
            while chunk := os.read(read_fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)


@functools.cache
def program() -> bytes | None:
    """The filter as raw BPF (8 bytes an instruction), or None where libseccomp is not installed."""
    lib = _library()
    if lib is None:
        return None
    try:
        return _build(lib)
    except OSError:
        return None


def install(bpf: bytes) -> None:
    """Install `bpf` on this thread for good (needs no-new-privs or CAP_SYS_ADMIN); inherited by every child."""
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
