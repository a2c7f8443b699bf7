import random
from typing import Any, Dict, Optional, Tuple

import textarena as ta
from gem.core import Env


class TextArenaWrapperEnv(Env):
    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.inner = ta.make("Wordle-v0")

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        return str(self.inner.reset(num_players=1)), {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        done, info = self.inner.step(action)
        return str(info), 1.0 if done else 0.0, bool(done), False, {}
