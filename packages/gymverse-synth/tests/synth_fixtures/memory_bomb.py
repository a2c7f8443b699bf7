"""MemoryBomb: reset allocates without bound (fixture: must be stopped by the sandbox memory limit)."""

from __future__ import annotations

from typing import Any

from gymverse.core import Env, EnvMetadata, StepResult


class MemoryBomb(Env):
    """Builds an ever-growing table at reset."""

    metadata = EnvMetadata(name="MemoryBomb", family="synth", domain="game", description="Never finishes setup.")
    complexity_params = {"size": (1, 10)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        table = []
        while True:
            table.append(bytearray(16 * 1024 * 1024))

    def _step(self, action: str) -> StepResult:
        return StepResult("", 0.0, True, False, {})

    def solve(self) -> str:
        return "\\boxed{0}"
