"""PressToWin: any well-formed action wins (fixture: a degenerate task a constant policy solves)."""

from __future__ import annotations

from typing import Any

from gymverse.actions import parse_boxed
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult


class PressToWin(Env):
    """Claims to be a counting puzzle, but every answer is accepted."""

    metadata = EnvMetadata(
        name="PressToWin",
        family="synth",
        domain="logic",
        description="Count the stars (every answer wins).",
        action_format=r"\boxed{<integer>}",
        max_turns=5,
    )
    complexity_params = {"stars": (3, 30)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.stars = int(self.params["stars"]) + int(self.rng.integers(0, 3))
        return "*" * self.stars + "\nHow many stars? Answer with \\boxed{<integer>}.", {}

    def _step(self, action: str) -> StepResult:
        parse_boxed(action, what="a count")
        return StepResult("Correct!", SUCCESS_REWARD, True, False, {"success": True})

    def solve(self) -> str:
        return f"\\boxed{{{self.stars}}}"
