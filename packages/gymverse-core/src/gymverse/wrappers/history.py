"""`HistoryWrapper`: the observation becomes a bounded, clearly separated transcript of the last K turns."""

from __future__ import annotations

from collections import deque
from typing import Any, Literal

from gymverse.actions import extract_boxed
from gymverse.core import StepResult, Wrapper
from gymverse.protocol import EnvLike

ActionView = Literal["full", "boxed"]


class HistoryWrapper(Wrapper):
    r"""Replace each observation with the recent interaction history, rendered for an LLM prompt.

    The rendering is::

        [Turn 0] Observation:
        <first observation, i.e. the task>

        [... 3 earlier turns omitted ...]

        [Turn 4] Your action:
        <action>

        [Turn 4] Observation:
        <observation>

    Args:
        env: the env to wrap.
        window: how many of the most recent turns (action + observation) to show; None keeps all of them.
        include_actions: show the agent's own actions (off: only the observations).
        keep_first: always show the first observation (it usually states the task) even when it left the window.
        action_view: ``"full"`` shows the raw action text; ``"boxed"`` shows only its last ``\boxed{...}`` (or the
            raw text when it has none), which keeps long chain-of-thought out of the prompt.
        separator: placed between blocks.

    `reset` clears the history; `history` returns the retained turns.
    """

    def __init__(
        self,
        env: EnvLike,
        window: int | None = 8,
        include_actions: bool = True,
        keep_first: bool = True,
        action_view: ActionView = "full",
        separator: str = "\n\n",
    ) -> None:
        super().__init__(env)
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be a positive integer or None, got {window!r}")
        if action_view not in ("full", "boxed"):
            raise ValueError(f"action_view must be 'full' or 'boxed', got {action_view!r}")
        self._window = window
        self._include_actions = include_actions
        self._keep_first = keep_first
        self._action_view: ActionView = action_view
        self._separator = separator
        self._first: str | None = None
        self._turns: deque[tuple[int, str | None, str]] = deque(maxlen=window)
        self._total = 0  # turns seen this episode, so the omitted count survives the bounded deque

    @property
    def window(self) -> int | None:
        """How many recent turns are shown (None: all)."""
        return self._window

    @property
    def history(self) -> list[dict[str, Any]]:
        """Retained turns as ``{"turn", "action", "observation"}`` dicts (turn 0 has action None)."""
        out: list[dict[str, Any]] = []
        if self._first is not None:
            out.append({"turn": 0, "action": None, "observation": self._first})
        out.extend({"turn": t, "action": a, "observation": o} for t, a, o in self._turns)
        return out

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the wrapped env and start a fresh history."""
        obs, info = self.env.reset(seed=seed)
        self._turns.clear()
        self._first = None
        self._total = 0
        if self._keep_first:
            self._first = obs
        else:
            self._turns.append((0, None, obs))
            self._total = 1
        return self._render(), info

    def step(self, action: str) -> StepResult:
        """Step the wrapped env and append the turn to the history."""
        res = self.env.step(action)
        self._total += 1
        turn = int(res.info.get("turn", self._total))
        self._turns.append((turn, action, res.observation))
        return StepResult(self._render(), res.reward, res.terminated, res.truncated, res.info)

    def _show_action(self, action: str) -> str:
        if self._action_view == "boxed":
            boxed = extract_boxed(action)
            if boxed is not None:
                return r"\boxed{" + boxed + "}"
        return action

    def _render(self) -> str:
        blocks: list[str] = []
        if self._first is not None:
            blocks.append(f"[Turn 0] Observation:\n{self._first}")
        omitted = self._total - len(self._turns)
        if omitted > 0:
            blocks.append(f"[... {omitted} earlier turn{'s' if omitted != 1 else ''} omitted ...]")
        for turn, action, obs in self._turns:
            if action is not None and self._include_actions:
                blocks.append(f"[Turn {turn}] Your action:\n{self._show_action(action)}")
            blocks.append(f"[Turn {turn}] Observation:\n{obs}")
        return self._separator.join(blocks)
