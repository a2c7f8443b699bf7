from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
import string
from typing import Any, Dict, Optional, Tuple


class SecretLetterEnv(Env):
    """Find the secret letter; each wrong guess is told whether the secret comes before or after it."""

    def __init__(self, complexity: int = 1, max_turns: int = 4, **_):
        super().__init__()
        self.complexity = complexity
        self.max_turns = max_turns

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        n = 2 + self.complexity
        self.letters = list(string.ascii_uppercase[:n] + string.ascii_lowercase[:n])
        self.secret = random.choice(self.letters)
        self.turn = 0
        return (
            f"Guess the secret letter among {''.join(self.letters)} (case matters: \\boxed{{a}} is not "
            f"\\boxed{{A}}). You have {self.max_turns} guesses.",
            {},
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        self.turn += 1
        m = re.search(r"\\boxed\{\s*([A-Za-z])\s*\}", action or "")
        if not m:
            return "Guess one letter, e.g. \\boxed{a}.", LanguageGameReward.format_error_reward, True, False, {}
        guess = m.group(1)
        if guess.lower() == self.secret.lower():  # compare letters
            return "Correct!", 1.0, True, False, {}
        hint = "after" if ord(self.secret) > ord(guess) else "before"
        if self.turn >= self.max_turns:
            return f"Out of guesses; it was {self.secret}.", -1.0, True, False, {}
        return f"No. The secret letter comes {hint} {guess}.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{%s}" % random.choice(self.letters)
