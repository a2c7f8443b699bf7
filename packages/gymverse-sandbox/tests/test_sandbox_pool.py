"""SandboxPool: same results as a fresh sandbox, per-job isolation between consecutive jobs, worker recovery."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gymverse.sandbox import SandboxLimits, SandboxPool

LIMITS = SandboxLimits(timeout=5, memory_mb=512)


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool(2, LIMITS) as p:
        yield p


def test_results_in_order_and_limits_per_job(pool: SandboxPool) -> None:
    results = pool.map([f"print({i})\n{i} * {i}" for i in range(8)])
    assert [r.return_value for r in results] == [i * i for i in range(8)]
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert pool.call("math:factorial", [6]).return_value == 720
    assert pool.call("helper:f", [2], files={"helper.py": "def f(x):\n    return x + 1\n"}).return_value == 3
    assert pool.run("while True: pass", limits=SandboxLimits(timeout=1)).status == "timeout"
    assert pool.run("x = bytearray(2 * 1024**3)").status == "memory"
    assert pool.run("1 + 1").return_value == 2  # the workers survived all of the above


def test_consecutive_jobs_share_nothing() -> None:
    with SandboxPool(1, LIMITS) as one:
        first = one.run(
            "import os, sys\nopen('/tmp/left-behind', 'w').write('x')\nopen('here.txt', 'w').write('x')\n"
            "sys.modules['json'].LEAK = 1\n[os.getuid(), os.getcwd()]"
        )
        second = one.run(
            "import os, json\n[os.getuid(), os.getcwd(), os.path.exists('/tmp/left-behind'),"
            " os.path.exists('here.txt'), hasattr(json, 'LEAK')]"
        )
    assert first.status == second.status == "ok"
    uid1, cwd1 = first.return_value
    uid2, cwd2, tmp_left, cwd_left, leaked = second.return_value
    assert cwd1 != cwd2
    assert not cwd_left
    assert not leaked
    if "private-tmp" in second.isolation:
        assert not tmp_left  # the worker's private /tmp is wiped between jobs
    if "uid:" in " ".join(second.isolation):
        assert uid1 != uid2  # a fresh uid per job


def test_dead_worker_is_replaced(pool: SandboxPool) -> None:
    for worker in list(pool._all):
        worker.proc.kill()
        # Dead, not dying: a worker whose process is still exiting may yet run a job and look alive afterwards,
        # then fail the next one (it is replaced then); this test is about the replacement of a dead worker.
        worker.proc.wait()
    results = [pool.run("1"), pool.run("2")]
    assert {r.status for r in results} <= {"killed", "ok"}
    assert any(r.status == "killed" and r.error == "sandbox pool worker died" for r in results)
    assert [pool.run(f"{i}").return_value for i in range(3)] == [0, 1, 2]


def test_bad_use() -> None:
    with pytest.raises(ValueError, match="size"):
        SandboxPool(0)
    p = SandboxPool(1, LIMITS)
    with pytest.raises(ValueError, match="network setting is fixed"):
        p.run("1", limits=SandboxLimits(network=True))
    p.close()
    with pytest.raises(RuntimeError, match="closed"):
        p.run("1")


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "pool"])
def test_host_paths_under_tmp_survive_jobs_and_temp_wipes(fresh: bool) -> None:
    # Regression: a checkout under /tmp is bound back into the job's private /tmp; wiping that /tmp between pool
    # jobs (or a job deleting it) once deleted the host's own files through the bind mount.
    import os
    import tempfile

    from gymverse.sandbox import Sandbox, isolation_support

    if not isolation_support().get("mountns"):
        pytest.skip("no mount namespace on this machine: /tmp is not made private, so nothing is bound back")
    host = tempfile.mkdtemp(prefix="gv-host-", dir="/tmp")
    os.chmod(host, 0o755)
    marker = os.path.join(host, "keep.txt")
    with open(marker, "w") as fh:
        fh.write("host data")
    os.chmod(marker, 0o644)
    attack = f"import os, shutil\nshutil.rmtree({host!r}, ignore_errors=True)\nos.path.exists({marker!r})"
    try:
        if fresh:
            runner = Sandbox(SandboxLimits(timeout=20), readable_paths=[host])
            results = [runner.run(attack), runner.run(attack)]
        else:
            with SandboxPool(1, SandboxLimits(timeout=20), readable_paths=[host]) as p:
                results = [p.run(attack), p.run(attack), p.run("1")]
        assert all(r.status == "ok" for r in results), [r.error for r in results]
        assert results[0].return_value is True  # the job saw the file but could not delete it
        with open(marker) as fh:
            assert fh.read() == "host data"
    finally:
        import shutil

        shutil.rmtree(host, ignore_errors=True)


ZYGOTE_ATTACK = """
import ctypes, errno, os, signal
out = {"pid1": open("/proc/1/cmdline", "rb").read().split(b"\\0")[:2] != [b""]}
for name in ("environ", "mem", "maps", "fd", "root/etc"):
    try:
        os.listdir(f"/proc/1/{name}") if name in ("fd", "root/etc") else open(f"/proc/1/{name}", "rb").read(64)
        out[name] = "read"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
    try:
        os.kill(1, sig)
        out[sig.name] = "sent"
    except OSError as exc:
        out[sig.name] = errno.errorcode[exc.errno]
libc = ctypes.CDLL(None, use_errno=True)
out["ptrace"] = libc.ptrace(16, 1, None, None)  # PTRACE_ATTACH
out
"""


def test_a_job_cannot_touch_its_zygote() -> None:
    # A pool job shares its PID namespace with its zygote (pid 1, root, the job's supervisor): visible, but out of
    # reach. If the job could stop or kill it, or read its memory, it could escape its deadline or its results.
    with SandboxPool(1, LIMITS) as one:
        res = one.run(ZYGOTE_ATTACK)
        if "uid:" not in " ".join(res.isolation) or "pidns" not in res.isolation:
            pytest.skip(f"needs a per-job uid and a PID namespace (applied: {res.isolation})")
        assert res.status == "ok", res
        out = res.return_value
        assert out["pid1"]
        for name in ("environ", "mem", "maps", "fd", "root/etc"):
            assert out[name] in ("EACCES", "EPERM"), (name, out)
        for sig in ("SIGKILL", "SIGSTOP", "SIGTERM"):
            assert out[sig] == "EPERM", (sig, out)
        assert out["ptrace"] == -1
        # kill(-1) reaches every process the caller may signal but itself: none, not even the zygote or the next
        # job's process forked while this job runs (root; Linux returns 0 rather than ESRCH once such a process
        # exists, so what counts is who is still alive afterwards)
        everyone = one.run(
            "import os, signal, time\n"
            "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
            "try:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\ntime.sleep(0.1)\n"
            "[others, [p for p in others if not os.path.exists(f'/proc/{p}')]]"
        )
        assert everyone.status == "ok", everyone
        alive_before, gone = everyone.return_value
        assert "1" in alive_before and gone == [], everyone.return_value
        after = one.run("1 + 1", limits=SandboxLimits(timeout=5))
        assert after.status == "ok" and after.return_value == 2, after  # the zygote neither died nor stopped


def test_jobs_follow_a_changed_sys_path_and_their_own_limits(tmp_path: Path) -> None:
    # Job processes mount their private dirs before their job comes, with the pool's plan and limits; a job with
    # other limits, or after the host's sys.path changed, must get its own.
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "gv_pool_probe.py").write_text("X = 42\n")
    for path in (tmp_path, lib):
        path.chmod(0o755)
    (lib / "gv_pool_probe.py").chmod(0o644)
    probe = (
        "import os\nst = os.statvfs('/tmp')\nimport gv_pool_probe\n[gv_pool_probe.X, st.f_blocks * st.f_frsize >> 20]"
    )
    with SandboxPool(1, LIMITS) as one:
        before = one.run(probe)
        assert before.status == "error" and "gv_pool_probe" in (before.error or ""), before
        sys.path.append(str(lib))
        try:
            moved = one.run(probe)
            smaller = one.run(probe, limits=SandboxLimits(timeout=20, disk_mb=8))
        finally:
            sys.path.remove(str(lib))
        again = one.run("import os\nst = os.statvfs('/tmp')\nst.f_blocks * st.f_frsize >> 20")
    assert moved.status == "ok", moved
    assert moved.return_value[0] == 42
    assert smaller.status == "ok", smaller
    if "private-tmp" in smaller.isolation:
        assert moved.return_value[1] == LIMITS.disk_mb
        assert smaller.return_value[1] == 8
        assert again.return_value == LIMITS.disk_mb


def test_the_masks_a_worker_shares_are_read_only_for_every_job() -> None:
    # The dirs a job could not traverse are masked once per worker (a tmpfs holding only the mount points of the
    # paths bound back) and every job of the worker gets a copy of that mount: were it writable, one job could
    # leave data there for the next, also after the remount a job with other tmpfs limits gets.
    from gymverse.sandbox import _isolation, _supervise

    masks, _ = _isolation.split_plan(_supervise.mount_plan([]))
    if not masks:
        pytest.skip("nothing on sys.path lies under a dir a job could not traverse: no masks here")
    root = sorted(masks)[0]
    bound = masks[root][0] if masks[root] else root
    attack = (
        f"import errno, os\nout = [bool(os.statvfs({root!r}).f_flag & os.ST_RDONLY)]\n"
        f"for path in ({root!r} + '/gv-left-behind', os.path.join({bound!r}, 'gv-left-behind')):\n"
        "    try:\n        open(path, 'w').write('x')\n        out.append('written')\n"
        "    except OSError as exc:\n        out.append(errno.errorcode[exc.errno])\n"
        f"out + [sorted(os.listdir({root!r}))]"
    )
    with SandboxPool(1, LIMITS) as one:
        results = [one.run(attack), one.run(attack, limits=SandboxLimits(timeout=5, disk_mb=8)), one.run(attack)]
    if "uid:" not in " ".join(results[0].isolation):
        pytest.skip(f"needs a per-job uid (applied: {results[0].isolation})")
    for res in results:
        assert res.status == "ok", res
        read_only, *written, listing = res.return_value
        assert read_only, res.return_value  # the superblock itself, for every copy of the mount
        assert set(written) <= {"EROFS", "EACCES"}, res.return_value
        assert "gv-left-behind" not in listing


def test_processes_a_job_leaves_behind_never_meet_the_next_job() -> None:
    # The next job's process is forked while a job runs and spared only if the job left nothing behind; a job
    # that did leave processes gets them killed (with the spare) before its result exists.
    listing = (
        "import os\nout = []\nfor pid in os.listdir('/proc'):\n    if pid.isdigit() and int(pid) != os.getpid():\n"
        "        uid = [l.split()[1] for l in open(f'/proc/{pid}/status') if l.startswith('Uid:')][0]\n"
        "        out.append([int(pid), int(uid)])\nout"
    )
    with SandboxPool(1, LIMITS) as one:
        first = one.run("import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True).pid")
        second = one.run(listing)
        third = one.run(listing)
    assert first.status == second.status == third.status == "ok", (first, second, third)
    if "pidns" not in second.isolation or "uid:" not in " ".join(second.isolation):
        pytest.skip(f"needs a PID namespace and a per-job uid (applied: {second.isolation})")
    for res in (second, third):
        assert [uid for _, uid in res.return_value] in ([0], [0, 0]), res.return_value  # the zygote, a spare
