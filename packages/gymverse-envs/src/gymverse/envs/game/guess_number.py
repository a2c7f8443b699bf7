"""GuessTheNumber: find a hidden integer with higher/lower feedback (binary search)."""

from __future__ import annotations

from typing import Any

from gymverse.actions import ActionFormatError, parse_boxed
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult


class GuessTheNumber(Env):
    """The agent guesses a hidden number in ``[1, upper]``; each guess is answered "higher" or "lower".

    Rewards: 1.0 on success, 0 otherwise per turn, -0.1 for a malformed action (see `Env.format_penalty`).
    Complexity widens the range and tightens the turn budget relative to log2(range).
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="GuessTheNumber",
        family="game",
        domain="game",
        description="Find a hidden integer in a range using 'higher'/'lower' feedback.",
        action_format=r"\boxed{<integer>}",
        max_turns=30,
    )
    complexity_params = {"upper": (10, 5000), "slack": (6, 0)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.upper = int(self.params["upper"])
        self.target = int(self.rng.integers(1, self.upper + 1))
        self.lo, self.hi = 1, self.upper
        # binary search needs ceil(log2(upper+1)) guesses; slack adds spare turns at easy levels
        self.budget = int(self.upper).bit_length() + int(self.params["slack"])
        self.params["max_turns"] = self.budget
        obs = (
            f"I am thinking of an integer between 1 and {self.upper}. You have {self.budget} guesses. "
            r"Answer with \boxed{<integer>}."
        )
        return obs, {"upper": self.upper}

    def _step(self, action: str) -> StepResult:
        text = parse_boxed(action, what="an integer guess")
        try:
            guess = int(text)
        except ValueError:
            raise ActionFormatError(f"{text!r} is not an integer") from None
        if not 1 <= guess <= self.upper:
            return StepResult(f"{guess} is outside 1..{self.upper}. Guess again.", 0.0, False, False, {})
        if guess == self.target:
            return StepResult(f"Correct! The number was {guess}.", SUCCESS_REWARD, True, False, {"success": True})
        if guess < self.target:
            self.lo = max(self.lo, guess + 1)
            return StepResult(f"{guess} is too low. Higher.", 0.0, False, False, {})
        self.hi = min(self.hi, guess - 1)
        return StepResult(f"{guess} is too high. Lower.", 0.0, False, False, {})

    def solve(self) -> str:
        return r"\boxed{" + str((self.lo + self.hi) // 2) + "}"

    def sample_random_action(self) -> str:
        return r"\boxed{" + str(int(self.rng.integers(1, self.upper + 1))) + "}"
