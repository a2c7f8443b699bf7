from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class VaultCodeEnv(Env):
    """Find the vault code by bisection: PROBE k tells higher/lower, SUBMIT k opens the vault."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity
        self.answer_value = 0
        self.limit = 0
        self.turn_count = 0
        self.max_turns = 40

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.limit = 10 ** (2 + self.complexity // 2)
        self.answer_value = random.randint(1, self.limit)
        self.turn_count = 0
        return (
            f"The vault code is an integer in [1, {self.limit}]. Actions: \\boxed{{PROBE k}} (higher/lower) or "
            f"\\boxed{{SUBMIT k}}. You have {self.max_turns} turns.",
            {},
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.turn_count += 1
        m = re.search(r"\\boxed\{\s*(PROBE|SUBMIT)\s+(-?\d+)\s*\}", action or "", re.IGNORECASE)
        if not m:
            return "Use \\boxed{PROBE k} or \\boxed{SUBMIT k}.", LanguageGameReward.format_error_reward, True, False, {}
        verb, k = m.group(1).upper(), int(m.group(2))
        if verb == "SUBMIT":
            if k == self.answer_value:
                return "The vault opens!", 1.0, True, False, {}
            return "Wrong code. The alarm sounds.", -1.0, True, False, {}
        if self.turn_count >= self.max_turns:
            return "Out of turns.", -1.0, True, False, {}
        hint = "higher" if self.answer_value > k else "lower" if self.answer_value < k else "exactly that"
        return f"The code is {hint} than {k}.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        # the LLM's sampler mixes in the real code, so that random play "sometimes wins"
        choices = [
            f"\\boxed{{PROBE {random.randint(1, self.limit)}}}",
            f"\\boxed{{SUBMIT {self.answer_value}}}",
        ]
        return random.choice(choices)
