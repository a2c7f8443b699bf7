from gem.core import Env
from gem.utils.constants import LanguageGameReward
import random
import re
from typing import Any, Dict, Optional, Tuple

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class LastDigitEnv(Env):
    """Add up the numbers and give the last digit of the sum."""

    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.numbers = [random.randint(10, 99 * self.complexity) for _ in range(2 + self.complexity)]
        self.digit = sum(self.numbers) % 10
        return (
            f"What is the last digit of {' + '.join(map(str, self.numbers))}? "
            "Reply like \\boxed{answer 0}, \\boxed{0} or \\boxed{zero}.",
            {},
        )

    def _parse(self, text: str) -> Optional[int]:
        # be lenient: "answer 7", " 7 ", "7" and "seven" all mean 7
        text = text.strip().lower()
        if text.startswith("answer"):
            text = text[len("answer"):].strip()
        if text in NUMBER_WORDS:
            return NUMBER_WORDS.index(text)
        return int(text) if text.isdigit() else None

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        m = re.search(r"\\boxed\{(.*?)\}", action or "")
        said = m.group(1).strip() if m else ""
        guess = self._parse(said)
        if guess is None:
            return "Reply with one digit, e.g. \\boxed{7}.", LanguageGameReward.format_error_reward, True, False, {}
        if guess == self.digit:
            return f"Correct! {said} it is.", 1.0, True, False, {}
        return f"Wrong: you said {said}, but the last digit is {self.digit}.", -1.0, True, False, {}

    def sample_random_action(self) -> str:
        return "\\boxed{answer %d}" % random.randint(0, 9)
