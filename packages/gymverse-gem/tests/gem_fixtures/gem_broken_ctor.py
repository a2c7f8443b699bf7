"""GEM-style fixture whose constructor fails."""

from typing import Any

from gem.core import Env


class BrokenBoardEnv(Env):
    def __init__(self, size: int = 0) -> None:
        super().__init__()
        if size <= 0:
            raise ValueError(f"board size must be positive, got {size}")
        self.size = size

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        return "board", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "board", 0.0, True, False, {}
