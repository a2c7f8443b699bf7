from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class BalanceScaleEnv(Env):
    """One coin is heavier than the others; weigh groups and name its index."""

    def __init__(self, complexity: int = 1, max_turns: int = 8, **_):
        super().__init__()
        self.complexity = complexity
        self.max_turns = max_turns

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.num_coins = 3 + 2 * self.complexity
        self.weights = [10] * self.num_coins
        self.heavy = self.weights.index(max(self.weights))
        self.weights[random.randrange(self.num_coins)] += 1
        self.turn_count = 0
        return (
            f"{self.num_coins} coins (0..{self.num_coins - 1}); one is heavier. "
            "\\boxed{weigh 0,1 vs 2,3} compares groups, \\boxed{answer k} names the heavy coin.",
            {},
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.turn_count += 1
        m = re.search(r"\\boxed\{(.*?)\}", action or "")
        if not m:
            return "Use \\boxed{...}.", LanguageGameReward.format_error_reward, True, False, {}
        text = m.group(1).strip().lower()
        if text.startswith("answer"):
            try:
                k = int(text.split()[-1])
            except ValueError:
                return "answer needs a coin index.", LanguageGameReward.format_error_reward, True, False, {}
            if k == self.heavy:
                return "Correct!", 1.0, True, False, {}
            return "Wrong coin.", -1.0, True, False, {}
        if text.startswith("weigh") and " vs " in text:
            left, right = text[5:].split(" vs ")
            try:
                lw = sum(self.weights[int(i)] for i in left.split(",") if i.strip())
                rw = sum(self.weights[int(i)] for i in right.split(",") if i.strip())
            except (ValueError, IndexError):
                return "Bad coin list.", LanguageGameReward.format_error_reward, True, False, {}
            side = "left" if lw > rw else "right" if rw > lw else "balanced"
            done = self.turn_count >= self.max_turns
            return f"The scale tips: {side}.", -1.0 if done else 0.0, done, False, {}
        return "Unknown action.", LanguageGameReward.format_error_reward, True, False, {}

    def sample_random_action(self) -> str:
        if random.random() < 0.5:
            return "\\boxed{answer %d}" % random.randrange(self.num_coins)
        a, b = random.sample(range(self.num_coins), 2)
        return "\\boxed{weigh %d vs %d}" % (a, b)
