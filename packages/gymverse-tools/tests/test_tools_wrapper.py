"""ToolEnvWrapper: tool calls do not step the env, spend a budget, return observations, never raise."""

from __future__ import annotations

import gymverse
import pytest
from gymverse.sandbox import SandboxLimits, SandboxPool
from gymverse.tools import PythonTool, Tool, ToolCallError, ToolEnvWrapper, extract_tag


class EchoTool(Tool):
    """Deterministic stand-in: ``<echo>text</echo>`` returns the text upper-cased; ``<echo>boom</echo>`` raises."""

    name = "echo"

    def __init__(self) -> None:
        self.closed = False

    def parse(self, action: str) -> str | None:
        return extract_tag(action, "echo")

    def execute(self, payload: str) -> str:
        if payload == "boom":
            raise RuntimeError("echo exploded")
        return payload.upper()

    def instruction(self) -> str:
        return "Write <echo>text</echo> to hear it back."

    def close(self) -> None:
        self.closed = True


def make(max_tool_calls: int = 2, tool_reward: float = 0.0, tool_error_reward: float = 0.0) -> ToolEnvWrapper:
    env = gymverse.make("game:GuessTheNumber", complexity=3)
    return ToolEnvWrapper(env, [EchoTool()], max_tool_calls, tool_reward, tool_error_reward)


def test_reset_describes_tools_and_zeroes_counters() -> None:
    env = make()
    obs, info = env.reset(seed=1)
    assert "Write <echo>text</echo>" in obs
    assert "up to 2 calls" in obs
    assert info["tool_calls"] == 0
    assert info["tool_calls_remaining"] == 2
    assert info["tool_call_counts"] == {"echo": 0}
    assert info["tool"] is None


def test_tool_call_does_not_step_the_env_and_spends_budget() -> None:
    env = make(tool_reward=0.05)
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step("thinking <echo>hello</echo>")
    assert (obs, reward, terminated, truncated) == ("HELLO", 0.05, False, False)
    assert env.unwrapped.turn == 0  # the env never saw the action
    assert info["tool"] == "echo"
    assert info["tool_calls"] == 1
    assert info["tool_calls_remaining"] == 1
    res = env.step(env.solve())
    assert env.unwrapped.turn == 1
    assert res.info["tool"] is None
    assert res.info["tool_calls"] == 1
    assert "Higher" in res.observation or "Lower" in res.observation or res.info.get("success")


def test_budget_spent_sends_actions_to_the_env() -> None:
    env = make(max_tool_calls=1)
    env.reset(seed=1)
    first = env.step("<echo>a</echo>")
    assert "Tool budget spent" in first.observation
    res = env.step("<echo>b</echo>")  # no budget left: the env parses it, and it is not a \boxed{} guess
    assert res.info["format_error"] is True
    assert res.reward == pytest.approx(-0.1)
    assert env.unwrapped.turn == 1
    assert res.info["tool_calls"] == 1
    assert res.info["tool"] is None


def test_malformed_and_failing_calls_are_observations() -> None:
    env = make(max_tool_calls=3, tool_error_reward=-0.05)
    env.reset(seed=1)
    res = env.step("<echo>unclosed")
    assert res.observation.startswith("Malformed echo tool call:")
    assert "never closed" in res.observation
    assert res.reward == -0.05
    assert res.info["format_error"] is True
    assert res.info["tool_errors"] == 1
    res = env.step("<echo>boom</echo>")
    assert res.observation == "echo tool failed: RuntimeError: echo exploded"
    assert res.info["tool_errors"] == 2
    assert res.info["tool_calls"] == 2
    assert env.unwrapped.turn == 0


def test_zero_budget_and_validation() -> None:
    env = make(max_tool_calls=0)
    obs, _ = env.reset(seed=1)
    assert "Tools" not in obs
    assert env.step("<echo>x</echo>").info["format_error"] is True
    with pytest.raises(ValueError, match="max_tool_calls"):
        make(max_tool_calls=-1)
    with pytest.raises(ValueError, match="unique"):
        ToolEnvWrapper(gymverse.make("game:GuessTheNumber"), [EchoTool(), EchoTool()])


def test_state_clone_and_determinism() -> None:
    actions = ["<echo>x</echo>", r"\boxed{5}", "<echo>y</echo>", r"\boxed{7}", r"\boxed{9}"]

    def transcript() -> list[tuple[str, float, bool]]:
        env = make()
        out = [(env.reset(seed=7)[0], 0.0, False)]
        for action in actions:
            res = env.step(action)
            out.append((res.observation, res.reward, res.done))
            if res.done:
                break
        return out

    assert transcript() == transcript()
    env = make()
    env.reset(seed=7)
    env.step("<echo>x</echo>")
    snap = env.get_state()
    twin = env.clone()
    assert isinstance(twin, ToolEnvWrapper)
    env.step("<echo>y</echo>")
    assert env.tool_calls == 2
    assert twin.tool_calls == 1
    env.set_state(snap)
    assert env.tool_calls == 1
    assert env.step(r"\boxed{5}").info["tool_calls"] == 1


def test_close_closes_tools() -> None:
    env = make()
    tool = env.tools[0]
    env.close()
    assert isinstance(tool, EchoTool)
    assert tool.closed


def test_python_tool_end_to_end() -> None:
    with SandboxPool(1, SandboxLimits(timeout=3, memory_mb=512)) as pool:
        env = ToolEnvWrapper(gymverse.make("game:GuessTheNumber", complexity=1), [PythonTool(pool)], max_tool_calls=3)
        env.reset(seed=3)
        res = env.step("<python>print(sum(range(10)))</python>")
        assert res.observation == "45"
        assert res.info["tool"] == "python"
        res = env.step("```python\nimport os\nos.fork\n")  # unclosed fence
        assert "never closed" in res.observation
        assert res.info["tool_errors"] == 1
        answer = env.step(env.solve())
        assert env.unwrapped.turn == 1
        assert answer.info["tool_calls"] == 2


def test_tool_call_error_is_a_value_error() -> None:
    assert issubclass(ToolCallError, ValueError)
