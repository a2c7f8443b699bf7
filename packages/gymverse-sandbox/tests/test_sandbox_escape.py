"""Escape and abuse suite: every case is run for real and its containment asserted.

Cases run on both a fresh-process `Sandbox` and a warm `SandboxPool`, since the pool forks jobs from a
long-lived worker and must apply the same limits per job.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, SandboxResult

LIMITS = SandboxLimits(timeout=10, memory_mb=512, max_processes=16)
#: For jobs that never end on their own (generous LIMITS keep the others robust on a loaded CI machine).
SHORT = SandboxLimits(timeout=3, memory_mb=512, max_processes=16)
REPO_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", params=["fresh", "pool"])
def runner(request: pytest.FixtureRequest) -> Iterator[Sandbox | SandboxPool]:
    if request.param == "fresh":
        yield Sandbox(LIMITS)
    else:
        with SandboxPool(1, LIMITS) as pool:
            yield pool


def _job_uid(res: SandboxResult) -> int | None:
    for item in res.isolation:
        if item.startswith("uid:"):
            return int(item[4:])
    return None


def _live_processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            pids.append(int(entry))
    return pids


def _require(res: SandboxResult, measure: str) -> None:
    assert res.isolation, f"the job died before reporting its isolation: {res}"
    if not any(item == measure or item.startswith(measure + ":") for item in res.isolation):
        pytest.skip(f"isolation {measure!r} is not available on this machine (applied: {res.isolation})")


def test_infinite_loop_is_killed(runner: Sandbox | SandboxPool) -> None:
    res = runner.run("while True:\n    pass", limits=SHORT)
    assert res.status == "timeout"


def test_fork_bomb_is_contained(runner: Sandbox | SandboxPool) -> None:
    # Children that cannot fork keep trying; only the process limit and the final kill stop them.
    src = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    res = runner.run(src, limits=SHORT)
    _require(res, "uid")
    assert res.status == "timeout"
    uid = _job_uid(res)
    assert uid is not None
    assert _live_processes_of(uid) == []  # every bomb process was killed with the job
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork


def test_process_and_thread_counts_are_capped(runner: Sandbox | SandboxPool) -> None:
    forks = (
        "import os, time\nn = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n            time.sleep(30)\n"
        "        n += 1\nexcept OSError:\n    pass\nn"
    )
    res = runner.run(forks)
    _require(res, "uid")
    assert res.status == "ok"
    assert 1 <= res.return_value < LIMITS.max_processes
    threads = (
        "import threading, time\nn = 0\ntry:\n    while n < 500:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n        n += 1\n"
        "except RuntimeError:\n    pass\nn"
    )
    res = runner.run(threads)
    assert res.status == "ok"
    assert 1 <= res.return_value < LIMITS.max_processes


def test_memory_bomb(runner: Sandbox | SandboxPool) -> None:
    limits = SandboxLimits(timeout=10, memory_mb=200)
    res = runner.run("data = []\nwhile True:\n    data.append(b'x' * 10**7)", limits=limits)
    assert res.status == "memory"
    assert res.max_rss_kb < limits.memory_mb * 1024


def test_hundred_megabytes_of_output_is_capped_without_buffering(runner: Sandbox | SandboxPool) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    src = "import sys\nchunk = 'z' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)"
    res = runner.run(src, limits=SandboxLimits(timeout=30, memory_mb=512))
    assert res.status == "ok"
    assert res.stdout_truncated
    assert "(total 100000000)" in res.stdout
    assert len(res.stdout) < LIMITS.max_output_bytes + 200
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 50  # the 100 MB were drained and dropped, not held


def test_writes_outside_the_work_dir_do_not_land(runner: Sandbox | SandboxPool) -> None:
    token = uuid.uuid4().hex
    temp = [f"{d}/gv-escape-{token}" for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock") if os.path.isdir(d)]
    targets = [*temp, os.path.join(REPO_DIR, f"gv-escape-{token}")]
    src = (
        f"import os\nwritten = []\nfor path in {targets!r}:\n    try:\n        open(path, 'w').write('pwned')\n"
        "        written.append(path)\n    except OSError:\n        pass\nwritten"
    )
    res = runner.run(src)
    _require(res, "uid")
    _require(res, "private-tmp")
    assert res.status == "ok"
    assert os.path.join(REPO_DIR, f"gv-escape-{token}") not in res.return_value  # unwritable for the job uid
    assert set(temp) <= set(res.return_value)  # the writes "succeeded", confined to private tmpfs mounts
    for path in targets:
        assert not os.path.exists(path), path  # temp-dir writes went to a private tmpfs that is gone


def test_parent_secrets_are_not_visible(runner: Sandbox | SandboxPool, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"gv-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GYMVERSE_FAKE_SECRET", secret)
    src = (
        f"import os\nout = [repr(dict(os.environ))]\nfor path in ['/proc/self/environ', '/proc/{os.getpid()}/environ',"
        " '/proc/1/environ']:\n    try:\n        out.append(open(path, 'rb').read().decode(errors='replace'))\n"
        "    except OSError as e:\n        out.append(str(e))\nprint(out)"
    )
    res = runner.run(src)
    assert res.status == "ok"
    assert "GYMVERSE_FAKE_SECRET" not in res.stdout
    assert secret not in res.stdout
    assert "PATH" in res.stdout  # the scrubbed environment still has the basics


def _connect_source(port: int) -> str:
    return (
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n"
        "    outcome = 'connected'\nexcept OSError as e:\n    outcome = type(e).__name__\noutcome"
    )


def _pending_connection(server: socket.socket) -> bool:
    # A completed TCP handshake waits in the backlog, so a non-blocking accept sees any connection that was made.
    server.setblocking(False)
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_loopback_server_is_unreachable(runner: Sandbox | SandboxPool) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        res = runner.run(_connect_source(server.getsockname()[1]))
        _require(res, "netns")
        assert res.status == "ok"
        assert res.return_value in ("OSError", "ConnectionRefusedError", "TimeoutError")
        assert not _pending_connection(server)


def test_loopback_server_is_reachable_when_network_is_allowed() -> None:
    # Control for the test above: the same client does connect when isolation is switched off.
    with socket.create_server(("127.0.0.1", 0)) as server:
        res = Sandbox(SandboxLimits(timeout=5, network=True)).run(_connect_source(server.getsockname()[1]))
        assert "netns" not in res.isolation
        assert res.return_value == "connected"
        assert _pending_connection(server)


def test_blacklist_bypass_shell_is_contained(runner: Sandbox | SandboxPool) -> None:
    # No blacklist to bypass: the shell runs, as the job's uid, and its fork bomb meets the process limit.
    src = (
        "sp = __import__('subpro' + 'cess')\n"
        "sp.run(['sh', '-c', 'id -u; (sleep 300 &) ; b() { b | b & }; b'], timeout=30)"
    )
    res = runner.run(src)
    _require(res, "uid")
    uid = _job_uid(res)
    assert uid is not None
    assert res.status == "ok"  # the shell returns at once, leaving its bomb running in the background
    assert res.stdout.splitlines()[0] == str(uid)  # the shell did run, unprivileged
    assert _live_processes_of(uid) == []  # the detached sleep and the bomb died with the job


def test_every_background_process_is_gone_when_run_returns(runner: Sandbox | SandboxPool) -> None:
    # bwrap exits as soon as its init reports the job's exit, while the kernel is still killing the rest of the
    # namespace: `run` must wait for that, not for bwrap (seen: detached sleeps alive after `run` returned).
    src = (
        "import subprocess\n"
        "[subprocess.Popen(['sleep', '300'], start_new_session=True) for _ in range(12)]\n"
        "len(__import__('os').listdir('/proc'))"
    )
    for _ in range(20):
        res = runner.run(src)
        assert res.status == "ok", res.error
        _require(res, "uid")
        uid = _job_uid(res)
        assert uid is not None
        assert _live_processes_of(uid) == []


def test_detached_background_process_dies_with_the_job(runner: Sandbox | SandboxPool) -> None:
    src = "import subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\np.pid"
    res = runner.run(src)
    assert res.status == "ok"
    _require(res, "uid")
    uid = _job_uid(res)
    assert uid is not None
    assert _live_processes_of(uid) == []
    assert res.return_value > 0
