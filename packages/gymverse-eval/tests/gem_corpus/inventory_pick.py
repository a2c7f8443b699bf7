from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class InventoryPickEnv(Env):
    """Pick items from a shelf and report the total weight of the picked ones."""

    def __init__(self, complexity: int = 1, max_turns: int = 3, **_):
        super().__init__()
        self.complexity = complexity
        self.max_turns = max_turns
        self.complexity_params = {"num_items": (4, 12), "num_picks": (2, 12)}
        self.param_variance = {"num_items": 1, "num_picks": 1}

    def _apply_complexity_params(self):
        t = (self.complexity - 1) / 9.0
        for name, (lo, hi) in self.complexity_params.items():
            value = lo + (hi - lo) * t + random.uniform(-self.param_variance[name], self.param_variance[name])
            setattr(self, name, max(lo, int(round(value))))

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self._apply_complexity_params()
        self.weights = [random.randint(1, 9) for _ in range(self.num_items)]
        self.picked = random.sample(range(self.num_items), self.num_picks)
        self.turn_count = 0
        shelf = ", ".join(f"item{i}={w}kg" for i, w in enumerate(self.weights))
        picks = ", ".join(f"item{i}" for i in sorted(self.picked))
        return f"Shelf: {shelf}. Picked: {picks}. Total weight? Answer \\boxed{{kg}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.turn_count += 1
        m = re.search(r"\\boxed\{(\d+)\}", action or "")
        if not m:
            return "Use \\boxed{number}.", LanguageGameReward.format_error_reward, True, False, {}
        if int(m.group(1)) == sum(self.weights[i] for i in self.picked):
            return "Correct.", 1.0, True, False, {}
        if self.turn_count >= self.max_turns:
            return "Out of attempts.", -1.0, True, False, {}
        return "Not quite, try again.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%d}" % random.randint(self.num_picks, 9 * self.num_picks)
