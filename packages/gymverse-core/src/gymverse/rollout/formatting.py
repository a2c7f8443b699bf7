"""Formatting policies: turn an episode's history into the prompt for the next action.

History is ``obs_0, act_0, obs_1, ..., act_{t-1}, obs_t``. ``window=W`` keeps the first observation (the task
statement) plus the last ``W`` past turns (action and the observation it produced); ``None`` keeps everything.
Dropped turns are replaced by one note saying how many were omitted, so the model knows history was cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

Prompt = str | list[dict[str, str]]


@dataclass
class History:
    """One episode so far: observations (one more than actions) and the actions taken."""

    env_id: str
    observations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    def window(self, size: int | None) -> tuple[int, list[tuple[str, str]]]:
        """``(omitted, [(action_i, observation_{i+1}), ...])`` for the last `size` past turns."""
        pairs = list(zip(self.actions, self.observations[1:]))
        if size is None or len(pairs) <= size:
            return 0, pairs
        return len(pairs) - size, pairs[len(pairs) - size :] if size else []


class Formatter(Protocol):
    """Anything that maps a `History` to a prompt (text or chat messages)."""

    def format(self, history: History) -> Any:
        """The prompt for the next action."""
        ...


def _check_window(window: int | None) -> None:
    if window is not None and window < 0:
        raise ValueError(f"window must be None or >= 0, got {window}")


@dataclass
class HistoryFormatter:
    """Plain-text history: ``Observation:``/``Action:`` blocks ending with the action cue."""

    window: int | None = 8
    system_prompt: str = ""
    observation_label: str = "Observation:"
    action_label: str = "Action:"

    def __post_init__(self) -> None:
        _check_window(self.window)

    def format(self, history: History) -> str:
        """The prompt text."""
        omitted, pairs = history.window(self.window)
        parts = [self.system_prompt] if self.system_prompt else []
        parts.append(f"{self.observation_label} {history.observations[0]}")
        if omitted:
            parts.append(f"[{omitted} earlier turn{'s' if omitted != 1 else ''} omitted]")
        for act, obs in pairs:
            parts.append(f"{self.action_label} {act}")
            parts.append(f"{self.observation_label} {obs}")
        parts.append(self.action_label)
        return "\n\n".join(parts)


@dataclass
class ChatFormatter:
    """Chat messages: system, user (observations) and assistant (actions) turns."""

    window: int | None = 8
    system_prompt: str = ""

    def __post_init__(self) -> None:
        _check_window(self.window)

    def format(self, history: History) -> list[dict[str, str]]:
        """The message list."""
        omitted, pairs = history.window(self.window)
        msgs = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        first = history.observations[0]
        if omitted:
            first = f"{first}\n\n[{omitted} earlier turn{'s' if omitted != 1 else ''} omitted]"
        msgs.append({"role": "user", "content": first})
        for act, obs in pairs:
            msgs.append({"role": "assistant", "content": act})
            msgs.append({"role": "user", "content": obs})
        return msgs
