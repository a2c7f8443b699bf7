from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class LotteryDrawEnv(Env):
    """Distinct numbers are drawn; name the largest gap between consecutive sorted numbers."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.num_values = 2 + self.complexity + random.randint(-1, 1)
        self.max_value = 10 + random.randint(0, 3)
        drawn = set()
        while len(drawn) < self.num_values:  # draw until we have enough distinct numbers
            drawn.add(random.randint(1, self.max_value))
        self.values = sorted(drawn)
        self.answer = max(b - a for a, b in zip(self.values, self.values[1:]))
        return f"Numbers: {self.values}. Largest gap between neighbours? \\boxed{{n}}", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{(\d+)\}", action or "")
        if not m:
            return "Use \\boxed{n}.", LanguageGameReward.format_error_reward, True, False, {}
        if int(m.group(1)) == self.answer:
            return "Correct.", 1.0, True, False, {}
        return f"Wrong, it was {self.answer}.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%d}" % random.randint(1, 4)
