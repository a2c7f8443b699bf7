"""Hostile tool calls from the security review (issue 19): each is contained as an observation, in linear time."""

from __future__ import annotations

import time

import gymverse
import pytest
from gymverse.tools import MCPTool, PythonTool, ToolEnvWrapper, extract_tag


def _wrapped(*tools: object) -> ToolEnvWrapper:
    env = gymverse.make("game:GuessTheNumber", complexity=3)
    wrapper = ToolEnvWrapper(env, list(tools), max_tool_calls=5)  # type: ignore[arg-type]
    wrapper.reset(seed=0)
    return wrapper


def test_repeated_unclosed_tags_parse_in_linear_time() -> None:
    action = "<python>" * 20_000  # took 19-38 s with a lazy regex (quadratic)
    start = time.monotonic()
    result = _wrapped(PythonTool(), MCPTool("http://127.0.0.1:9/mcp")).step(action)
    assert time.monotonic() - start < 3.0  # generous: linear parsing takes milliseconds
    assert "never closed" in result.observation
    assert result.info["format_error"] is True
    assert extract_tag("a <x> b </x> <x> c </x>", "x") == "b"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"name": "add", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}", "usable JSON"),
        ('{"name": "add", "arguments": {"a": ' + "[" * 500 + "]" * 500 + "}}", "deeper"),
        ('{"name": "add", "arguments": {"a": ' + "9" * 5000 + "}}", "usable JSON"),
        ('{"name": "add", "arguments": {"a": "\\udcff"}}', "lone surrogate"),
    ],
    ids=["deep-100k", "deep-500", "5000-digits", "lone-surrogate"],
)
def test_hostile_mcp_payloads_are_malformed_calls_not_exceptions(payload: str, message: str) -> None:
    result = _wrapped(MCPTool("http://127.0.0.1:9/mcp")).step(f"<mcp>{payload}</mcp>")
    assert result.info["format_error"] is True
    assert message in result.observation
