from gem.core import Env
import random
import re
from typing import Any, Dict, Optional, Tuple

WORDS = ["apple", "eagle", "earth", "horse", "event", "tiger", "river", "robot", "table", "eleven", "night", "tree"]


class WordChainEnv(Env):
    """Say a word starting with the last letter of the previous word; reach the target chain length."""

    reward_range = (0.0, 1.0)

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.length = 1 + self.complexity // 2
        self.chain = [random.choice(WORDS)]
        return f"Chain {self.length} words after '{self.chain[0]}'. Answer \\boxed{{word}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{\s*([a-z]+)\s*\}", (action or "").lower())
        if not m:
            return "Use \\boxed{word}.", 0.0, True, False, {}
        word = m.group(1)
        if word in self.chain:
            return f"'{word}' was already used.", -1.0, False, False, {}
        if word[0] != self.chain[-1][-1]:
            return f"'{word}' does not start with '{self.chain[-1][-1]}'.", 0.0, True, False, {}
        self.chain.append(word)
        if len(self.chain) > self.length:
            return "Chain complete!", 1.0, True, False, {}
        return f"Good. Next word after '{word}'?", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%s}" % random.choice(WORDS)
