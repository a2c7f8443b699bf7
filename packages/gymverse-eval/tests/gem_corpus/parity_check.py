from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, List, Optional, Tuple


class ParityCheckEnv(Env):
    """Answer yes/no: is the sum of each shown list even? One list per turn."""

    def __init__(self, **_):
        super().__init__()
        self.complexity = 1  # set before reset by the curriculum
        self.lists: List[List[int]] = []
        self.index = 0

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        rounds = 1 + (self.complexity - 1) // 2
        length = 2 + self.complexity
        self.lists = [[random.randint(0, 99) for _ in range(length)] for _ in range(rounds)]
        self.index = 0
        return f"{len(self.lists)} rounds. Is the sum of {self.lists[0]} even? Answer \\boxed{{yes}} or \\boxed{{no}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{\s*(yes|no)\s*\}", (action or "").lower())
        if not m:
            return "Answer with \\boxed{yes} or \\boxed{no}.", LanguageGameReward.format_error_reward, True, False, {}
        even = sum(self.lists[self.index]) % 2 == 0
        if (m.group(1) == "yes") != even:
            return "Wrong.", -1.0, True, False, {}
        self.index += 1
        if self.index == len(self.lists):
            return "All correct!", 1.0, True, False, {}
        return f"Right. Next: is the sum of {self.lists[self.index]} even?", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return random.choice([r"\boxed{yes}", r"\boxed{no}"])
