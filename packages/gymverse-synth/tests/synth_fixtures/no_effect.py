"""SortBySwaps with a declared knob it never reads (fixture: the complexity params change nothing)."""

from __future__ import annotations

from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult

GRAMMAR = CommandGrammar({"swap": [int, int]})


class SortBySwaps(Env):
    """Sort a list of distinct integers ascending; each turn swaps the items at two 0-based positions."""

    metadata = EnvMetadata(
        name="SortBySwaps",
        family="synth",
        domain="algorithm",
        description="Sort a shuffled list by swapping two positions per turn.",
        action_format=r"\boxed{swap i j}",
        max_turns=40,
    )
    complexity_params = {"length": (3, 12), "slack": (4, 0)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = 6  # the declared "length" param is never read
        self.items = [int(v) for v in self.rng.permutation(n) + 1]
        while self.items == sorted(self.items):
            self.items = [int(v) for v in self.rng.permutation(n) + 1]
        self.params["max_turns"] = n + 3
        return f"Sort ascending: {self.items}. Answer with \\boxed{{swap i j}} (0-based positions).", {}

    def _step(self, action: str) -> StepResult:
        cmd = GRAMMAR.parse(action)
        i, j = cmd.args
        if not (0 <= i < len(self.items) and 0 <= j < len(self.items)):
            return StepResult(f"Positions must be in 0..{len(self.items) - 1}.", 0.0, False, False, {})
        self.items[i], self.items[j] = self.items[j], self.items[i]
        if self.items == sorted(self.items):
            return StepResult(f"Sorted: {self.items}", SUCCESS_REWARD, True, False, {"success": True})
        return StepResult(f"Now: {self.items}", 0.0, False, False, {})

    def solve(self) -> str:
        target = sorted(self.items)
        i = next(k for k, v in enumerate(self.items) if v != target[k])
        j = self.items.index(target[i])
        return f"\\boxed{{swap {i} {j}}}"

    def sample_random_action(self) -> str:
        n = len(getattr(self, "items", [0, 0]))
        i, j = (int(v) for v in self.rng.integers(0, n, size=2))
        return f"\\boxed{{swap {i} {j}}}"
