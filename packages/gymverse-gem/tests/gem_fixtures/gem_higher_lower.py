"""GEM-style fixture: guess a hidden number with higher/lower hints (success only visible through the reward)."""

import random
import re
from typing import Any

from gem.core import Env
from gem.utils.constants import LanguageGameReward


class HigherLowerEnv(Env):
    """Guess a hidden integer in [1, max_number] within max_turns guesses."""

    def __init__(self, max_number: int = 20, max_turns: int = 8, **_: Any) -> None:
        super().__init__()
        if max_number < 2:
            raise ValueError("max_number must be at least 2")
        self.max_number = max_number
        self.max_turns = max_turns
        self.reset()

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.target = random.randint(1, self.max_number)
        self.turn_count = 0
        self.lo, self.hi = 1, self.max_number
        return (
            f"Guess my number between 1 and {self.max_number}; you have {self.max_turns} turns. "
            "Answer like \\boxed{7}.",
            {"suffix": "Enter your guess."},
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        found = re.findall(r"\\boxed{(\d+)}", action)
        if not found:
            return "No valid guess.", LanguageGameReward.format_error_reward, True, False, {}
        guess = int(found[-1])
        if guess == self.target:
            return f"Correct, it was {guess}.", LanguageGameReward.success_reward, True, False, {}
        if guess < self.target:
            self.lo = max(self.lo, guess + 1)
            hint = "higher"
        else:
            self.hi = min(self.hi, guess - 1)
            hint = "lower"
        if self.turn_count >= self.max_turns:
            return f"Out of turns; it was {self.target}.", LanguageGameReward.fail_reward, True, True, {}
        return f"{guess}: go {hint}.", LanguageGameReward.internal_step_reward, False, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{" + str(random.randint(1, self.max_number)) + "}"

    def solve(self) -> str:
        return "\\boxed{" + str((self.lo + self.hi) // 2) + "}"
