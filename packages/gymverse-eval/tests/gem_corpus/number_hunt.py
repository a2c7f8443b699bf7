"""Higher/lower number guessing; complexity grows through evolve() like the paper's progressive evolution."""
from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class NumberHuntEnv(Env):
    def __init__(self, max_turns: int = 6, **_):
        super().__init__()
        self.complexity = 1
        self.max_turns = max_turns
        self.upper = 8
        self.target = 1
        self.turn_count = 0

    def evolve(self, complexity: int) -> None:
        """Move to a new complexity level; takes effect at the next reset."""
        self.complexity = max(1, min(10, int(complexity)))

    def _derive_params(self) -> None:
        # range grows geometrically with the level: 8, 13, 21, ... ~ 200
        self.upper = int(round(8 * (1.43 ** (self.complexity - 1))))

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self._derive_params()
        self.target = random.randint(1, self.upper)
        self.turn_count = 0
        return (
            f"I picked a number between 1 and {self.upper}. You have {self.max_turns} guesses; "
            "answer like \\boxed{5}.",
            {},
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.turn_count += 1
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action or "")
        if m is None:
            return "Invalid format, use \\boxed{n}.", LanguageGameReward.format_error_reward, True, False, {}
        guess = int(m.group(1))
        if guess == self.target:
            return f"Correct! It was {self.target}.", 1.0, True, False, {}
        if self.turn_count >= self.max_turns:
            return f"Out of guesses, it was {self.target}.", -1.0, True, False, {}
        hint = "higher" if guess < self.target else "lower"
        return f"{guess} is wrong, go {hint}.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%d}" % random.randint(1, self.upper)


class NumberHuntEnvWithFeedback(NumberHuntEnv):
    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        info["diagnostic"] = {"error_type": "FormatError" if "invalid" in obs.lower() else "OK"}
        return obs, reward, terminated, truncated, info
