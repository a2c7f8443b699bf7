"""Issue 32: a seccomp filter and a minimal file system for every sandbox job, attacked from inside a job.

Each attack runs for real under bubblewrap (when installed), the ctypes launcher and a pool zygote.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, SandboxResult, _seccomp

LIMITS = SandboxLimits(timeout=20, memory_mb=512, max_processes=16)
REPO = Path(__file__).resolve().parents[3]

#: Each blocked call as raw syscall numbers (x86-64), so the job needs no helper that could be missing.
BLOCKED = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ret = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return "ok" if ret >= 0 else os.strerror(ctypes.get_errno())
out = {
    "unshare(CLONE_NEWUSER)": call(272, 0x10000000),
    "unshare(CLONE_NEWNS)": call(272, 0x20000),
    "io_uring_setup": call(425, 8, 0),
    "keyctl": call(250, 0, -3, 0, 0, 0),
    "add_key": call(248, 0, 0, 0, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "ptrace(PTRACE_TRACEME)": call(101, 0, 0, 0, 0),
    "mount": call(165, 0, 0, 0, 0, 0),
}
import subprocess, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()  # clone3 -> ENOSYS -> clone: threads still work
out["thread"] = "ok"
out["subprocess"] = subprocess.run(["true"]).returncode
out["fork"] = "ok" if os.waitpid(os.fork() or os._exit(0), 0) else "?"
out
"""


@pytest.fixture(scope="module")
def runner(every_launcher: Sandbox | SandboxPool) -> Sandbox | SandboxPool:
    return every_launcher


def _ok(res: SandboxResult) -> dict[str, object]:
    assert res.status == "ok", (res.error, res.stderr[-2000:])
    assert isinstance(res.return_value, dict)
    return res.return_value


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="raw x86-64 syscall numbers")
def test_namespace_io_uring_keyring_ptrace_bpf_and_mount_calls_fail_inside_a_job(
    runner: Sandbox | SandboxPool,
) -> None:
    if _seccomp.program() is None:
        pytest.skip("libseccomp is not installed here")
    res = runner.run(BLOCKED)
    out = _ok(res)
    assert "seccomp" in res.isolation
    blocked = {k: v for k, v in out.items() if k not in ("thread", "subprocess", "fork")}
    assert blocked == dict.fromkeys(blocked, "Operation not permitted"), out
    assert (out["thread"], out["subprocess"], out["fork"]) == ("ok", 0, "ok")  # ordinary work is unaffected


def test_host_files_outside_the_allowed_set_are_unreadable(runner: Sandbox | SandboxPool, tmp_path: Path) -> None:
    secret = REPO / f"gv-host-file-{uuid.uuid4().hex}"  # world-readable, in the checkout, off sys.path
    secret.write_text("host data")
    secret.chmod(0o644)
    given = tmp_path / "given.txt"
    given.write_text("given")
    tmp_path.chmod(0o755)
    given.chmod(0o644)
    src = (
        "import os\nout = {}\n"
        f"for path in ['/etc/passwd', '/etc/shadow', {str(secret)!r}, {str(given)!r}]:\n"
        "    try:\n        out[path] = open(path).read()\n    except OSError as e:\n"
        "        out[path] = type(e).__name__\n"
        "out['home'] = os.listdir('/home') if os.path.isdir('/home') else []\n"
        "import json, numpy, gymverse.core\nout"
    )
    try:
        if isinstance(runner, SandboxPool):
            res = runner.run(src)  # a pool's readable paths are fixed when it starts
        else:
            res = Sandbox(LIMITS, backend=runner.backend, readable_paths=[str(given)]).run(src)
    finally:
        secret.unlink()
    out = _ok(res)
    assert out["/etc/passwd"] == "FileNotFoundError", out
    assert out[str(secret)] == "FileNotFoundError", out
    assert out["/etc/shadow"] in ("FileNotFoundError", "PermissionError")
    assert out["home"] == []
    if not isinstance(runner, SandboxPool):
        assert out[str(given)] == "given"  # what the caller lists stays readable
