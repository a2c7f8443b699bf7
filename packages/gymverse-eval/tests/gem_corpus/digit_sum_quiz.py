from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class DigitSumQuizEnv(Env):
    """Add up the shown numbers and give the total."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        count = 2 + self.complexity
        self.numbers = [random.randint(10, 40 + 20 * self.complexity) for _ in range(count)]
        self.total = sum(self.numbers)
        return f"What is {' + '.join(map(str, self.numbers))}? Answer \\boxed{{total}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action or "")
        if not m:
            return "Use \\boxed{total}.", LanguageGameReward.format_error_reward, True, False, {}
        answer = m.group(1)
        if answer in str(self.total):  # accept the answer if it matches the total
            return "Correct!", 1.0, True, False, {}
        return f"Wrong, the total is {self.total}.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%d}" % random.randint(0, 60 * (2 + self.complexity))
