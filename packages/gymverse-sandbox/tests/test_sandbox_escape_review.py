"""Attacks from the security review of issue 19, each run for real against every launcher.

Fresh jobs run under bubblewrap (when installed) and under the ctypes launcher; pool jobs come from a zygote.
Every test here failed on the sandbox before the review's fixes.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, SandboxResult

LIMITS = SandboxLimits(timeout=20, memory_mb=512, max_processes=16)


@pytest.fixture(scope="module")
def runner(every_launcher: Sandbox | SandboxPool) -> Sandbox | SandboxPool:
    return every_launcher


def _tagged(tag: str) -> list[int]:
    """Pids of live processes whose command line is exactly ``sleep <tag>``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", tag.encode()] and state != "Z":
            pids.append(int(entry))
    return pids


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _kill_tagged(tag: str) -> None:
    for pid in _tagged(tag):  # only ever processes this test started (through the sandbox)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _lingering_job(tag: str) -> str:
    # A detached grandchild in its own session plus the job itself, both as `sleep <tag>`.
    return (
        "import os, subprocess\n"
        f"subprocess.Popen(['sleep', {tag!r}], start_new_session=True)\n"
        f"os.execvp('sleep', ['sleep', {tag!r}])"
    )


def _new_tag() -> str:
    return f"{int.from_bytes(os.urandom(3), 'little') + 1000}.{uuid.uuid4().int % 10**9}"


# --- High 1: no cross-job data in the pool ---------------------------------------------------------------


def test_pool_job_cannot_read_the_previous_jobs_data_from_its_memory() -> None:
    secret = uuid.uuid4().hex
    scan = (
        # Read every readable mapping of our own address space (ctypes: /proc/self/mem is root-owned after the
        # uid switch) and collect anything that looks like another job's secret.
        "import ctypes, re\nfound = set()\npattern = re.compile(rb'GV' + rb'LEAK-([0-9a-f]{32})')\n"
        "for line in open('/proc/self/maps').read().splitlines():\n"
        "    addr, perms = line.split()[:2]\n"
        "    lo, hi = (int(x, 16) for x in addr.split('-'))\n"
        "    if not perms.startswith('r') or hi - lo > 1 << 28 or '[v' in line:\n"
        "        continue\n"
        "    found.update(m.decode() for m in pattern.findall(ctypes.string_at(lo, hi - lo)))\n"
        "sorted(found)"
    )
    victim = f"SECRET = 'GVLEAK-{secret}'\nprint(SECRET)\nSECRET"
    with SandboxPool(1, SandboxLimits(timeout=30, memory_mb=1024)) as pool:
        first = pool.run(victim, files={"key.txt": f"GVLEAK-{secret}"})
        assert first.status == "ok", first
        second = pool.run(scan)
    assert second.status == "ok", second
    assert secret not in second.return_value


# --- High 2: forged results ------------------------------------------------------------------------------


FORGERIES = [
    b'{"status": "ok", "return_value": "forged"}\n',
    b'{"value": "forged", "status": "ok", "return_value": "forged"}\n',
]


@pytest.mark.parametrize("ending", ["os._exit(1)", "raise SystemExit(2)", "os.kill(os.getpid(), 9)"])
def test_a_job_cannot_forge_an_ok_result(runner: Sandbox | SandboxPool, ending: str) -> None:
    src = (
        "import os\n"
        f"for fd in range(3, 64):\n    for line in {FORGERIES!r}:\n"
        "        try:\n            os.write(fd, line)\n        except OSError:\n            pass\n"
        f"{ending}"
    )
    res = runner.run(src)
    assert res.status in ("error", "killed"), res
    assert res.return_value != "forged"


# --- High 3: jobs die with their supervisor and at their timeout ------------------------------------------


HOST = """
import sys
from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool
kind, src = sys.argv[1], sys.argv[2]
limits = SandboxLimits(timeout=60)
if kind == "pool":
    with SandboxPool(1, limits) as pool:
        print(pool.run(src), flush=True)
else:
    print(Sandbox(limits, backend=kind).run(src), flush=True)
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_job_dies_when_its_host_is_killed_or_interrupted(runner: Sandbox | SandboxPool, how: str) -> None:
    kind = "pool" if isinstance(runner, SandboxPool) else runner.backend
    tag = _new_tag()
    host = subprocess.Popen([sys.executable, "-c", HOST, kind, _lingering_job(tag)])
    try:
        assert _wait_for(lambda: len(_tagged(tag)) == 2, 30), "the job never started"
        host.send_signal(getattr(signal, how))  # SIGINT: Ctrl-C, KeyboardInterrupt inside run()
        host.wait(timeout=30)
        assert _wait_for(lambda: not _tagged(tag), 10), f"job processes outlived their host: {_tagged(tag)}"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        _kill_tagged(tag)


def test_jobs_die_with_pool_close() -> None:
    tag = _new_tag()
    results: list[SandboxResult] = []
    pool = SandboxPool(1, SandboxLimits(timeout=60))
    thread = threading.Thread(target=lambda: results.append(pool.run(_lingering_job(tag))))
    thread.start()
    try:
        assert _wait_for(lambda: len(_tagged(tag)) == 2, 30), "the job never started"
        pool.close()
        assert _wait_for(lambda: not _tagged(tag), 10), f"job processes outlived pool.close(): {_tagged(tag)}"
        thread.join(timeout=10)
        assert results and results[0].status == "killed"
    finally:
        pool.close()
        _kill_tagged(tag)
        thread.join(timeout=10)


def test_job_dies_when_a_step_timeout_interrupts_run() -> None:
    # The sync vector backend interrupts a hung env call with SIGALRM raising StepTimeout, mid `Sandbox.run`.
    from gymverse.pool import StepTimeout

    def on_alarm(signum: int, frame: object) -> None:
        raise StepTimeout("env call exceeded step_timeout")

    tag = _new_tag()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    gc.disable()  # an alarm landing in a gc callback (hypothesis registers one) would be swallowed there
    try:
        signal.setitimer(signal.ITIMER_REAL, 3.0)
        with pytest.raises(StepTimeout):
            Sandbox(SandboxLimits(timeout=60)).run(_lingering_job(tag))
        assert _wait_for(lambda: not _tagged(tag), 10), f"job processes outlived the StepTimeout: {_tagged(tag)}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        gc.enable()
        _kill_tagged(tag)


def test_job_dies_at_its_timeout(runner: Sandbox | SandboxPool) -> None:
    tag = _new_tag()
    try:
        res = runner.run(_lingering_job(tag), limits=SandboxLimits(timeout=2))
        assert res.status == "timeout"
        assert res.wall_time < 2 + 3
        assert not _tagged(tag)
    finally:
        _kill_tagged(tag)


# --- High 4: own IPC and PID namespaces ------------------------------------------------------------------


def _sysv(kind: str, key: int) -> str:
    get = "shmget(key, 4096, 0o1666)" if kind == "shm" else "msgget(key, 0o1666)"
    probe = "shmget(key, 0, 0)" if kind == "shm" else "msgget(key, 0)"
    return (
        f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nkey = {key}\n"
        f"made = libc.{get}\nfound = libc.{probe}\n[made, found]"
    )


@pytest.mark.parametrize("kind", ["shm", "msg"])
def test_sysv_ipc_objects_are_private_to_a_job(runner: Sandbox | SandboxPool, kind: str) -> None:
    key = int.from_bytes(os.urandom(3), "little") + 1
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        first = runner.run(_sysv(kind, key))  # creates the object and leaves it behind
        assert first.status == "ok", first
        assert first.return_value[0] >= 0
        second = runner.run(
            f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"libc.{'shmget' if kind == 'shm' else 'msgget'}({key}, {'0, 0' if kind == 'shm' else '0'})"
        )
        assert second.status == "ok", second
        assert second.return_value == -1  # the next job cannot see it
        host_id = libc.shmget(key, 0, 0) if kind == "shm" else libc.msgget(key, 0)
        assert host_id == -1  # nor does it outlive its job on the host
    finally:
        for _ in range(2):
            host_id = libc.shmget(key, 0, 0) if kind == "shm" else libc.msgget(key, 0)
            if host_id >= 0:
                (libc.shmctl if kind == "shm" else libc.msgctl)(host_id, 0, None)  # IPC_RMID


def test_a_job_sees_only_its_own_processes(runner: Sandbox | SandboxPool) -> None:
    src = (
        "import os\nout = []\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n"
        "        try:\n            out.append(open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace'))\n"
        "        except OSError:\n            pass\nout"
    )
    res = runner.run(src)
    assert res.status == "ok", res
    assert not any("pytest" in cmd for cmd in res.return_value), res.return_value
    assert len(res.return_value) <= 4  # init/monitor and the job itself


# --- Medium 5: inheritable host fds ---------------------------------------------------------------------


def test_inheritable_host_fds_do_not_reach_the_job(runner: Sandbox | SandboxPool, tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "root-only.txt")
    with open(path, "w") as f:
        f.write("host secret\n")
    os.chmod(path, 0o600)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    os.set_inheritable(fd, True)
    try:
        src = (
            "import os\nhits = []\nfor fd in range(3, 256):\n    try:\n        os.lseek(fd, 0, 0)\n"
            "        hits.append((fd, os.read(fd, 100).decode(errors='replace')))\n        os.write(fd, b'pwned')\n"
            "    except OSError:\n        pass\nhits"
        )
        res = runner.run(src)
        assert res.status == "ok", res
        assert not any("host secret" in text for _, text in res.return_value)
        with open(path) as f:
            assert f.read() == "host secret\n"
    finally:
        os.close(fd)


# --- Medium 6: malformed result lines --------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        b'{"status": "ok", "value": 1, "return_value": 1, "peak_rss_kb": "lots", "exit_code": "x"}\n',
        b'{"value": ' + b"[" * 100_000 + b"]" * 100_000 + b', "status": "ok"}\n',
        b'{"value": ' + b"[" * 300 + b"]" * 300 + b"}\n",
        b"\xff\xfe not json at all\n",
    ],
    ids=["non-numeric", "deep-100k", "deep-300", "garbage"],
)
def test_malformed_result_lines_are_reported_not_raised(runner: Sandbox | SandboxPool, payload: bytes) -> None:
    src = f"import os\nfor fd in (3, 4):\n    try:\n        os.write(fd, {payload!r})\n"
    src += "    except OSError:\n        pass\n"
    src += "os._exit(0)"
    res = runner.run(src)  # used to raise ValueError / RecursionError in the host
    assert isinstance(res.max_rss_kb, int)
    assert res.exit_code == 0
    if b"lots" in payload:
        # A job may hand over its own value (fd 3 is its value pipe); junk fields are dropped, never trusted.
        assert res.status in ("ok", "error")
    else:
        assert res.status == "error", res
        assert res.error and "malformed" in res.error


def test_result_parsing_caps_size_and_depth() -> None:
    from gymverse.sandbox import _protocol, _supervise

    assert _protocol.parse(b"[" * 50_000 + b"]" * 50_000) is None
    assert _protocol.parse(b'{"a": ' + b"[" * 250 + b"]" * 250 + b"}") is None
    assert _protocol.parse(b'{"a": ' + b"[" * 50 + b"]" * 50 + b"}") is not None
    limits = {"timeout": 1, "cpu_seconds": 1, "memory_mb": 1}
    line = b'{"status": "ok", "peak_rss_kb": "x", "cpu_time": [1], "exit_code": 1.5}\n'
    out = _supervise.result_from(line, False, limits)
    assert (out["status"], out["max_rss_kb"], out["cpu_time"], out["exit_code"]) == ("ok", 0, 0.0, None)


# --- Medium 7/8: temp dirs and the work dir are limited tmpfs that vanish with the job -------------------


DEEP_TREE = """
import os
os.chdir("/tmp")
for _ in range(1200):  # deeper than PATH_MAX: a wipe that walks paths cannot reach the bottom
    os.mkdir("dddddddd")
    os.chdir("dddddddd")
written = 0
try:
    with open("fill", "wb") as f:
        for _ in range(60):
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
except OSError:
    pass
written
"""


def test_deep_tree_in_tmp_does_not_reach_the_next_pool_job() -> None:
    limits = SandboxLimits(timeout=30, file_size_mb=64)  # the default disk_mb (64) bounds /tmp
    with SandboxPool(1, limits) as pool:
        first = pool.run(DEEP_TREE)
        assert first.status == "ok", first
        assert first.return_value >= 30
        second = pool.run("import os\nst = os.statvfs('/tmp')\n[os.listdir('/tmp'), st.f_bfree * st.f_frsize >> 20]")
    assert second.status == "ok", second
    entries, free_mb = second.return_value
    assert "dddddddd" not in entries
    assert free_mb >= 60


DISK_HOG = """
import os
bytes_written = files = 0
try:
    for i in range(12):
        with open(f"big{i}", "wb") as f:
            for _ in range(8):
                f.write(b"x" * (1 << 20))
                f.flush()
                bytes_written += 1 << 20
except OSError:
    pass
try:
    while files < 50_000:
        open(f"f{files}", "w").close()
        files += 1
except OSError:
    pass
open_fds = []
try:
    while len(open_fds) < 5000:
        open_fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
[bytes_written >> 20, files, len(open_fds), os.getcwd()]
"""


def test_work_dir_is_a_size_and_inode_limited_tmpfs(runner: Sandbox | SandboxPool) -> None:
    limits = SandboxLimits(timeout=20, disk_mb=32, max_files=2000, max_open_files=128)
    start = time.monotonic()
    res = runner.run(DISK_HOG, limits=limits)
    elapsed = time.monotonic() - start
    assert res.status == "ok", res
    mb, files, fds, cwd = res.return_value
    assert mb <= 32  # of 96 MB attempted
    assert files < 2000  # of 50k attempted
    assert fds < 128  # RLIMIT_NOFILE
    assert not os.path.exists(cwd)  # nothing of it on the host
    assert elapsed < limits.timeout


def test_cleanup_stays_inside_the_timeout_budget(runner: Sandbox | SandboxPool) -> None:
    # Keeps creating files after the inode limit is hit, so the job always runs into its timeout (on a quiet
    # machine 200k files fit in 3 s) and the host must clean up a full tmpfs inside the budget.
    src = (
        "import os\ni = 0\nwhile True:\n    try:\n        open(f'f{i}', 'w').close()\n"
        "    except OSError:\n        pass\n    i += 1"
    )
    start = time.monotonic()
    res = runner.run(src, limits=SandboxLimits(timeout=3, max_files=200_000, disk_mb=256))
    assert res.status == "timeout"
    assert time.monotonic() - start < 3 + 2.5


# --- Medium 15: races and setup failures -----------------------------------------------------------------


def test_run_racing_close_reports_instead_of_crashing() -> None:
    errors: list[BaseException] = []
    results: list[SandboxResult] = []
    pool = SandboxPool(2, SandboxLimits(timeout=10))

    def worker() -> None:
        for _ in range(20):
            try:
                results.append(pool.run("import time\ntime.sleep(0.05)\n1"))
            except RuntimeError as exc:
                if "closed" not in str(exc):
                    errors.append(exc)
                return
            except BaseException as exc:  # the bug: ValueError from list.remove
                errors.append(exc)
                return

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    for zygote in list(pool._all):  # a worker dies while jobs run, then the pool is closed under them
        zygote.proc.kill()
    pool.close()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert {r.status for r in results} <= {"ok", "killed"}


def test_failed_prepare_leaves_no_temp_dir(tmp_path: object) -> None:
    import tempfile

    before = set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(ValueError, match="directory"):
        Sandbox(LIMITS, backend="ctypes").run("1", files={"a": "x", "a/b": "y"})
    leftovers = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("gymverse-sbx-")}
    assert not leftovers
