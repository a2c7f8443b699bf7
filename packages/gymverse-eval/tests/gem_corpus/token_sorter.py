from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class TokenSorterEnv(Env):
    """Sort the tokens alphabetically and answer with them comma-separated."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity
        self.num_tokens = 2 + complexity
        self.token_len = 2 + complexity // 3

    def evolve(self, complexity: int) -> None:
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.tokens = ["".join(random.choice(letters) for _ in range(self.token_len)) for _ in range(self.num_tokens)]
        return f"Sort these tokens: {' '.join(self.tokens)}. Answer \\boxed{{a,b,c}}.", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{(.*?)\}", action or "")
        if not m:
            return "Use \\boxed{...}.", LanguageGameReward.format_error_reward, True, False, {}
        got = [t.strip() for t in m.group(1).split(",")]
        if got == sorted(self.tokens):
            return "Sorted!", 1.0, True, False, {}
        return "Not sorted.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        shuffled = list(self.tokens)
        random.shuffle(shuffled)
        return "\\boxed{%s}" % ",".join(shuffled)
