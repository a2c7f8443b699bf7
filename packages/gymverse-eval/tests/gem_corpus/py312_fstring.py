from gem.core import Env
import random
from typing import Any, Dict, Optional, Tuple


class BoardSizeEnv(Env):
    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.board = {"size": 2 + complexity}

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        super().reset(seed)
        self.cells = random.randint(1, self.board["size"] ** 2)
        return f"Board {self.board["size"]}x{self.board["size"]}: how many cells are marked? {self.cells}", {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        return "done", 1.0 if str(self.cells) in action else -1.0, True, False, {}
