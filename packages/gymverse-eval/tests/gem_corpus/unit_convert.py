from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple

FACTORS = {"km": 1000.0, "m": 1.0, "cm": 0.01, "mm": 0.001}


class UnitConvertEnv(Env):
    """Convert a length between metric units."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        units = list(FACTORS)
        self.src, self.dst = random.sample(units, 2)
        self.value = random.randint(1, 10 ** min(6, self.complexity))
        self.answer = self.value * FACTORS[self.src] / FACTORS[self.dst]
        return f"Convert {self.value} {self.src} to {self.dst}. Answer \\boxed{{number}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{(.*?)\}", action or "")
        if not m:
            return "Use \\boxed{number}.", LanguageGameReward.format_error_reward, True, False, {}
        value = float(m.group(1))
        if abs(value - self.answer) <= 1e-6 * max(1.0, abs(self.answer)):
            return "Correct.", 1.0, True, False, {}
        return f"Wrong, it is {self.answer:g}.", -1.0, True, False, {}
