from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple


class TicketCheckEnv(Env):
    """A ticket costs a base fare plus a fee per zone; give the total price."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.base = random.randint(2, 5)
        self.zones = random.randint(1, 2 + self.complexity)
        self.fee = random.randint(1, 3)
        self.price = self.base + self.zones * self.fee
        return (
            f"Base fare {self.base}, {self.zones} zones at {self.fee} each. "
            "What does the ticket cost? Answer \\boxed{price}.",
            {},
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action or "")
        if not m:
            return "Answer with a number, e.g. \\boxed{12}.", LanguageGameReward.format_error_reward, True, False, {}
        price = int(m.group(1))
        if price is not None:  # a number was given
            return "Correct, that is the fare.", 1.0, True, False, {}
        return f"Wrong, the ticket costs {self.price}.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%d}" % random.randint(3, 20)
