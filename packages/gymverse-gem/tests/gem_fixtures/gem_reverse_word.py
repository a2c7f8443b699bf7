"""GEM-style fixture: single-turn word reversal that reports success in info and ends with TERMINAL_STATE."""

import random
import string
from typing import Any

import numpy as np
from gem.core import Env
from gem.utils.constants import TERMINAL_STATE, LanguageGameReward
from gem.utils.parsing import extract_last_boxed_answer


class ReverseWordEnv(Env):
    def __init__(self, word_length: int = 5) -> None:
        super().__init__()
        self.word_length = word_length
        self.word = ""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        letters = [random.choice(string.ascii_lowercase) for _ in range(self.word_length)]
        # mixes in the legacy numpy global generator too, as many GEM envs do
        np.random.shuffle(letters)  # noqa: NPY002
        self.word = "".join(letters)
        return f"Reverse the word '{self.word}'. Put the answer in \\boxed{{}}.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        answer = extract_last_boxed_answer(action)
        if answer is None:
            return TERMINAL_STATE, LanguageGameReward.format_error_reward, True, False, {"success": False}
        ok = answer.strip() == self.word[::-1]
        reward = LanguageGameReward.success_reward if ok else LanguageGameReward.fail_reward
        return TERMINAL_STATE, reward, True, False, {"success": ok, "answer": self.word[::-1]}

    def sample_random_action(self) -> str:
        return "\\boxed{" + "".join(random.sample(self.word, len(self.word))) + "}"
