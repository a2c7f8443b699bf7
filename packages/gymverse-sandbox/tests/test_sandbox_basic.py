"""Sandbox results: statuses, return values, callables, limits, output capping, files and env."""

from __future__ import annotations

import json
import os

import pytest
from gymverse.sandbox import STATUSES, Sandbox, SandboxLimits, SandboxResult

FAST = SandboxLimits(timeout=5, memory_mb=512)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(FAST)


def test_source_runs_and_last_expression_is_the_return_value(sandbox: Sandbox) -> None:
    res = sandbox.run("import math\nprint('hello')\n{'pi': round(math.pi, 3), 'xs': [1, 2]}")
    assert res.status == "ok"
    assert res.stdout == "hello\n"
    assert res.return_value == {"pi": 3.142, "xs": [1, 2]}
    assert res.exit_code == 0
    assert res.cpu_time > 0
    assert res.max_rss_kb > 0
    assert "rlimits" in res.isolation
    json.dumps(res.to_dict())
    assert SandboxResult.from_dict(res.to_dict()) == res


def test_non_json_last_expression_keeps_repr_only(sandbox: Sandbox) -> None:
    res = sandbox.run("object()")
    assert res.status == "ok"
    assert res.return_value is None
    assert res.value_repr is not None
    assert res.value_repr.startswith("<object object")


def test_exception_gives_error_status_and_traceback(sandbox: Sandbox) -> None:
    res = sandbox.run("def f():\n    raise KeyError('nope')\nf()")
    assert res.status == "error"
    assert res.error == "KeyError: 'nope'"
    assert "Traceback" in res.stderr
    assert "line 2, in f" in res.stderr


def test_sys_exit_codes(sandbox: Sandbox) -> None:
    assert sandbox.run("import sys; sys.exit(0)").status == "ok"
    res = sandbox.run("import sys; sys.exit(3)")
    assert res.status == "error"
    assert res.error == "SystemExit: 3"
    res = sandbox.run("import os; os._exit(5)")
    assert (res.status, res.exit_code) == ("error", 5)
    assert "exited with code 5" in (res.error or "")


def test_signal_death_is_killed(sandbox: Sandbox) -> None:
    res = sandbox.run("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert res.status == "killed"
    assert res.error == "killed by signal SIGSEGV"


def test_callable_with_json_args(sandbox: Sandbox) -> None:
    res = sandbox.call("math:comb", [10, 3])
    assert (res.status, res.return_value) == ("ok", 120)
    res = sandbox.call("gymverse.text:plural", kwargs={"n": 3, "word": "turn"})  # a keyword call into gymverse
    assert (res.status, res.return_value) == ("ok", "3 turns")


def test_callable_from_a_file_in_the_work_dir(sandbox: Sandbox) -> None:
    res = sandbox.call("helper:double", [21], files={"helper.py": "def double(x):\n    return 2 * x\n"})
    assert (res.status, res.return_value) == ("ok", 42)


def test_callable_errors_are_clear(sandbox: Sandbox) -> None:
    res = sandbox.call("no_such_module_xyz:f")
    assert res.status == "error"
    assert "ModuleNotFoundError" in (res.error or "")
    res = sandbox.call("math:pi")
    assert res.status == "error"
    assert "not callable" in (res.error or "")
    res = sandbox.call("builtins:object")
    assert res.status == "error"
    assert "not JSON-serializable" in (res.error or "")
    with pytest.raises(ValueError, match=r"package\.module:function"):
        sandbox.call("math.factorial")
    with pytest.raises(TypeError, match="JSON-serializable"):
        sandbox.call("math:factorial", [object()])


def test_wall_clock_timeout(sandbox: Sandbox) -> None:
    res = sandbox.run("import time\nprint('start', flush=True)\ntime.sleep(60)", limits=SandboxLimits(timeout=3))
    assert res.status == "timeout"
    assert "wall-clock" in (res.error or "")
    assert res.stdout == "start\n"  # output produced before the kill is kept


def test_cpu_time_limit(sandbox: Sandbox) -> None:
    res = sandbox.run("while True:\n    pass", limits=SandboxLimits(timeout=20, cpu_seconds=1))
    assert res.status == "timeout"
    assert "CPU time" in (res.error or "")
    assert res.cpu_time > 0.5  # the kernel counted CPU time (rusage lags the RLIMIT_CPU tick accounting)


def test_memory_limit(sandbox: Sandbox) -> None:
    res = sandbox.run("x = bytearray(2 * 1024**3)")
    assert res.status == "memory"
    # A small limit keeps the page-filling short on a loaded machine.
    grow = "chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))"
    res = sandbox.run(grow, limits=SandboxLimits(memory_mb=200))
    assert res.status == "memory"


def test_file_size_limit(sandbox: Sandbox) -> None:
    src = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (3 * 1024 * 1024))"
    res = sandbox.run(src, limits=SandboxLimits(timeout=5, file_size_mb=1))
    assert res.status == "error"
    assert "File too large" in (res.error or "")


def test_output_is_capped_with_head_tail_and_marker(sandbox: Sandbox) -> None:
    src = "import sys\nprint('FIRST')\nsys.stdout.write('x' * 50000)\nprint('LAST')\nprint('E' * 9000, file=sys.stderr)"
    res = sandbox.run(src, limits=SandboxLimits(timeout=5, max_output_bytes=4000))
    assert res.status == "ok"
    assert res.stdout_truncated
    assert res.stderr_truncated
    assert res.stdout.startswith("FIRST\n")
    assert res.stdout.endswith("LAST\n")
    assert "bytes truncated (total 50011)" in res.stdout
    assert len(res.stdout) < 4200


def test_files_env_and_private_work_dir(sandbox: Sandbox) -> None:
    src = "import os\nopen('out.txt', 'w').write('y')\n[open('in.txt').read(), os.environ['MY_VAR'], os.getcwd()]"
    res = sandbox.run(src, files={"in.txt": "hi"}, env={"MY_VAR": "v"})
    assert res.status == "ok"
    content, var, cwd = res.return_value
    assert (content, var) == ("hi", "v")
    assert "gymverse-sbx-" in cwd
    assert not os.path.exists(cwd)  # deleted after the job
    second = sandbox.run("import os\nos.getcwd()")
    assert second.return_value != cwd  # every job gets its own directory
    for bad in ("../evil.txt", "/etc/evil", "a/../../evil"):
        with pytest.raises(ValueError, match="escapes the work dir"):
            sandbox.run("1", files={bad: "x"})


def test_limits_validation() -> None:
    with pytest.raises(ValueError, match="timeout"):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError, match="cpu_seconds"):
        SandboxLimits(cpu_seconds=-1)
    assert SandboxLimits(timeout=3).to_spec()["cpu_seconds"] == 3
    assert set(STATUSES) == {"ok", "error", "timeout", "memory", "killed"}
