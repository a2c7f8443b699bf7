"""`ToolEnvWrapper`: lets the agent call tools between env steps, under a per-episode tool budget.

Each action is first offered to the tools (in order). If one recognizes a call, the call runs, its output is
the observation, the env is *not* stepped, and the call counts against ``max_tool_calls``. A malformed call
(e.g. an unclosed ``<python>`` tag) also counts and yields an observation explaining the problem; it never
raises. Once the budget is spent, every action goes to the env unchanged.

Rewards: a tool call earns ``tool_reward`` (default 0.0; a small positive value encourages tool use, a negative
one charges for it) and a malformed one ``tool_error_reward`` (default 0.0). Env steps keep the env's reward.
``info`` always carries ``tool_calls``, ``tool_calls_remaining``, ``tool_errors``, ``tool_call_counts`` (per
tool) and ``tool`` (the tool used by this action, or None).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from gymverse.core import EnvLike, StepResult, Wrapper
from gymverse.tools.base import Tool, ToolCallError


class ToolEnvWrapper(Wrapper):
    """Adds `tools` to `env`; see the module docstring for the budget and reward rules."""

    def __init__(
        self,
        env: EnvLike,
        tools: Sequence[Tool],
        max_tool_calls: int = 10,
        tool_reward: float = 0.0,
        tool_error_reward: float = 0.0,
        describe_tools: bool = True,
    ) -> None:
        super().__init__(env)
        if max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be >= 0, got {max_tool_calls}")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        self.tools = list(tools)
        self.max_tool_calls = max_tool_calls
        self.tool_reward = float(tool_reward)
        self.tool_error_reward = float(tool_error_reward)
        self.describe_tools = describe_tools
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.tool_calls = 0
        self.tool_errors = 0
        self.tool_call_counts = {t.name: 0 for t in self.tools}

    def _tool_info(self, info: dict[str, Any], used: str | None) -> dict[str, Any]:
        info.update(
            tool_calls=self.tool_calls,
            tool_calls_remaining=self.max_tool_calls - self.tool_calls,
            tool_errors=self.tool_errors,
            tool_call_counts=dict(self.tool_call_counts),
            tool=used,
        )
        return info

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the env and the tool budget; the first observation lists the tools."""
        obs, info = self.env.reset(seed=seed)
        self._reset_counters()
        if self.describe_tools and self.tools and self.max_tool_calls > 0:
            lines = [t.instruction() for t in self.tools]
            obs = f"{obs}\n\nTools (up to {self.max_tool_calls} calls per episode):\n" + "\n".join(lines)
        return obs, self._tool_info(info, None)

    def _find_call(self, action: str) -> tuple[Tool, str | None, str | None] | None:
        for tool in self.tools:
            try:
                payload = tool.parse(action)
            except ToolCallError as err:
                return tool, None, str(err)
            except Exception as exc:  # a parser bug on hostile text is a malformed call, not a crashed episode
                return tool, None, f"could not parse the call ({type(exc).__name__}: {exc})"
            if payload is not None:
                return tool, payload, None
        return None

    def step(self, action: str) -> StepResult:
        """Run a tool call (budget permitting) or step the env."""
        if not isinstance(action, str):
            action = str(action)
        found = self._find_call(action) if self.tool_calls < self.max_tool_calls else None
        if found is None:
            obs, reward, terminated, truncated, info = self.env.step(action)
            return StepResult(obs, reward, terminated, truncated, self._tool_info(info, None))
        tool, payload, error = found
        self.tool_calls += 1
        self.tool_call_counts[tool.name] += 1
        if error is not None:
            self.tool_errors += 1
            obs, reward = f"Malformed {tool.name} tool call: {error}", self.tool_error_reward
        else:
            assert payload is not None
            try:
                obs, reward = tool.execute(payload), self.tool_reward
            except Exception as exc:  # a tool bug must not end the agent's episode
                self.tool_errors += 1
                obs, reward = f"{tool.name} tool failed: {type(exc).__name__}: {exc}", self.tool_error_reward
        left = self.max_tool_calls - self.tool_calls
        if left == 0:
            obs += "\n(Tool budget spent: your next actions go to the environment.)"
        info = self._tool_info({"format_error": error is not None}, tool.name)
        return StepResult(obs, reward, False, False, info)

    def get_state(self) -> dict[str, Any]:
        """Env state plus tool counters (tools themselves hold connections and are not snapshotted)."""
        own = {"tool_calls": self.tool_calls, "tool_errors": self.tool_errors, "counts": dict(self.tool_call_counts)}
        return {"env": self.env.get_state(), "wrapper": own}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state`."""
        self.env.set_state(state["env"])
        own = state["wrapper"]
        self.tool_calls, self.tool_errors = int(own["tool_calls"]), int(own["tool_errors"])
        self.tool_call_counts = dict(own["counts"])

    def clone(self) -> EnvLike:
        """A copy with a cloned env and the same (shared) tools."""
        twin = copy.copy(self)
        twin.env = self.env.clone()
        twin.tool_call_counts = dict(self.tool_call_counts)
        return twin

    def close(self) -> None:
        """Close the tools and the env."""
        for tool in self.tools:
            tool.close()
        self.env.close()
