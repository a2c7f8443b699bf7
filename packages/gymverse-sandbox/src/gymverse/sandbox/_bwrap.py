"""bubblewrap as the launcher of a fresh `Sandbox` job: bwrap creates the namespaces, our monitor runs inside.

bwrap (Flatpak's sandbox, Debian package ``bubblewrap``) is used when it is installed and we are root (as root it
needs no user namespace, so the job can still get its own unprivileged uid). It gives the job new PID, IPC, UTS,
cgroup, mount and (unless networking is allowed) network namespaces, a fresh ``/proc``, a minimal ``/dev``, a new
session (no TIOCSTI into the host's terminal) and ``--die-with-parent``; our monitor then mounts the limited tmpfs
dirs and drops the job to its own uid exactly as on the ctypes path.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import subprocess

#: Capabilities the monitor keeps (mounting the job's tmpfs, chown, uid switch, killing the job); the job itself
#: has none: it runs as an unprivileged uid under no-new-privs.
MONITOR_CAPS = (
    "CAP_SYS_ADMIN",
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_KILL",
)


#: The launcher's fd on which bwrap reports its sandbox's init (``--info-fd``; bwrap does not pass it on).
INFO_FD = 5


def command(network: bool, info_fd: int | None = None) -> list[str]:
    """The bwrap argv prefix (the monitor's command line follows); `info_fd`: where bwrap reports its init's pid."""
    argv = ["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for cap in MONITOR_CAPS:
        argv += ["--cap-add", cap]
    return [*argv, "--"]


@functools.cache
def usable() -> bool:
    """Whether bwrap is installed and works here as root (probed once: containers may forbid its namespaces)."""
    if os.geteuid() != 0 or os.environ.get("GYMVERSE_SANDBOX_BWRAP", "1") == "0" or not shutil.which("bwrap"):
        return False
    try:
        proc = subprocess.run([*command(False), "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def await_sandbox_end(info_fd: int, timeout: float) -> bool:
    """After the bwrap launcher exited: wait (up to `timeout` s) until its sandbox's init has exited, which the
    kernel allows only once every other process of the sandbox's PID namespace is gone; whether it has. Closes
    `info_fd`."""
    # bwrap exits as soon as its init reports the command's exit status, before the kernel has killed the rest of
    # the namespace (a job's background processes): the job is over when the init is, not when bwrap is.
    try:
        raw = os.read(info_fd, 1 << 16)  # bwrap wrote it before starting our launcher, and has exited
    finally:
        os.close(info_fd)
    try:
        child = json.loads(raw[: raw.find(b"}") + 1])["child-pid"]
    except (ValueError, KeyError, TypeError):
        return False  # bwrap failed before it started a sandbox (its error is on stderr)
    try:
        pidfd = os.pidfd_open(int(child))
    except (ProcessLookupError, ValueError):
        return True  # exited and reaped already
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)
