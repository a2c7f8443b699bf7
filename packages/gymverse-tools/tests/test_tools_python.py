"""PythonTool: parsing of tagged and fenced blocks, sandboxed execution, trimmed output and errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gymverse.sandbox import SandboxLimits, SandboxPool
from gymverse.tools import PythonTool, ToolCallError


@pytest.fixture(scope="module")
def tool() -> Iterator[PythonTool]:
    with SandboxPool(1, SandboxLimits(timeout=2, memory_mb=512)) as pool:
        yield PythonTool(pool, max_output_chars=300)


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("Let me compute.\n<python>\nprint(1 + 1)\n</python>", "print(1 + 1)"),
        ("```python\nx = 3\nprint(x)\n```\nthen answer", "x = 3\nprint(x)"),
        ("```py\nprint('a')\n```", "print('a')"),
        ("<python>print(1)</python> and <python>print(2)</python>", "print(1)"),
        (r"No code here, answer \boxed{4}", None),
        ("```bash\nls\n```", None),
    ],
)
def test_parse(action: str, code: str | None) -> None:
    assert PythonTool(runner=object()).parse(action) == code  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("<python>print(1)", "never closed"),
        ("```python\nprint(1)\n", "never closed"),
        ("<python>   </python>", "empty"),
    ],
)
def test_parse_malformed(action: str, message: str) -> None:
    with pytest.raises(ToolCallError, match=message):
        PythonTool(runner=object()).parse(action)  # type: ignore[arg-type]


def test_output_and_trailing_value(tool: PythonTool) -> None:
    assert tool.execute("print('hi')\n6 * 7") == "hi\n42"
    assert tool.execute("x = 1") == "(no output)"
    assert tool.execute("sorted({3, 1, 2})") == "[1, 2, 3]"


def test_error_shows_exception_and_traceback_tail(tool: PythonTool) -> None:
    out = tool.execute("print('before')\n1 / 0")
    assert out.startswith("[error] before")
    assert "ZeroDivisionError: division by zero" in out


def test_timeout_and_memory_are_reported(tool: PythonTool) -> None:
    assert tool.execute("import time\ntime.sleep(60)").startswith("[timeout] wall-clock timeout")
    # a busy loop hits the CPU-time limit (= the timeout) and the wall clock together: either may be reported
    busy = tool.execute("while True: pass")
    assert busy.startswith(("[timeout] wall-clock timeout", "[timeout] CPU time limit of 2 s exceeded")), busy
    assert tool.execute("x = bytearray(4 * 1024**3)").startswith("[memory]")


def test_long_output_is_trimmed(tool: PythonTool) -> None:
    out = tool.execute("for i in range(1000):\n    print(i)")
    assert len(out) < 400
    assert out.startswith("0\n1\n2\n")
    assert out.endswith("999")
    assert "chars truncated" in out


def test_default_runner_is_a_fresh_sandbox() -> None:
    assert PythonTool(timeout=5).execute("import os\nos.getcwd()").startswith("'/tmp/gymverse-sbx-")
