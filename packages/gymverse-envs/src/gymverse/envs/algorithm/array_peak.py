"""HiddenArrayPeak: locate the peak of a hidden unimodal array with a logarithmic query budget."""

from __future__ import annotations

import math
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed


class HiddenArrayPeak(CommandEnv):
    r"""Find the index of the maximum of a hidden array that strictly increases, then strictly decreases.

    Commands: ``\boxed{get i}`` reveals ``a[i]``; ``\boxed{compare i j}`` reveals whether ``a[i]`` is less than,
    equal to or greater than ``a[j]``; both cost one query. ``\boxed{submit i}`` ends the episode. The budget is
    ``ceil(log2(n))`` comparisons plus a slack that shrinks to 0 at level 10, which only a binary search on the slope
    (compare ``m`` with ``m+1``) meets; a linear scan does not. The turn limit is the budget plus 3.

    Rewards: 1.0 for the peak index (success); 0.0 and episode end for any other index; 0.0 per query; -0.1 for a
    malformed command (base class). Out-of-range indices are refused without spending budget.
    Complexity: array length 16 -> 4096 and slack 4 -> 0.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="HiddenArrayPeak",
        family="algorithm",
        domain="algorithm",
        description="Binary-search the peak of a hidden unimodal array using get/compare queries.",
        action_format=r"\boxed{get <i>}, \boxed{compare <i> <j>} or \boxed{submit <i>}",
        max_turns=20,
    )
    complexity_params = {"length": (16, 4096), "slack": (4, 0)}
    grammar = CommandGrammar({"get": [int], "compare": [int, int], "submit": [int]})
    query_verbs = frozenset({"get", "compare"})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = int(self.params["length"])
        self.n = n
        self.peak = int(self.rng.integers(1, n - 1))
        steps = self.rng.integers(1, 50, size=n)
        values = [0] * n
        values[0] = int(self.rng.integers(0, 1000))
        for i in range(1, self.peak + 1):
            values[i] = values[i - 1] + int(steps[i])
        for i in range(self.peak + 1, n):
            values[i] = values[i - 1] - int(steps[i])
        self.values = values
        # sign of a[i] - a[j] for every pair the agent has learned about (directly or via two gets)
        self.known: dict[tuple[int, int], int] = {}
        self.seen: dict[int, int] = {}
        self.queries_left = math.ceil(math.log2(n)) + int(self.params["slack"])
        self.params["max_turns"] = self.queries_left + 3
        obs = (
            f"A hidden array a[0..{n - 1}] of integers strictly increases up to a peak and then strictly decreases "
            f"(the peak is neither end). Find the peak index with at most {self.queries_left} queries: "
            r"\boxed{get i}, \boxed{compare i j}; then \boxed{submit i}."
        )
        return obs, {"length": n, "query_budget": self.queries_left}

    def _refuse(self, *idx: int) -> StepResult | None:
        bad = [i for i in idx if not 0 <= i < self.n]
        if not bad:
            return None
        self.queries_left += 1  # refund: an out-of-range index reveals nothing
        return self.feedback(f"Index {bad[0]} is out of range 0..{self.n - 1}.")

    def _learn(self, i: int, j: int, sign: int) -> None:
        self.known[(i, j)] = sign
        self.known[(j, i)] = -sign

    def _do_get(self, i: int) -> StepResult:
        refused = self._refuse(i)
        if refused is not None:
            return refused
        self.seen[i] = self.values[i]
        for j, vj in self.seen.items():
            self._learn(i, j, (self.values[i] > vj) - (self.values[i] < vj))
        return self.feedback(f"a[{i}] = {self.values[i]}.")

    def _do_compare(self, i: int, j: int) -> StepResult:
        refused = self._refuse(i, j)
        if refused is not None:
            return refused
        sign = (self.values[i] > self.values[j]) - (self.values[i] < self.values[j])
        self._learn(i, j, sign)
        rel = {-1: "<", 0: "=", 1: ">"}[sign]
        return self.feedback(f"a[{i}] {rel} a[{j}].")

    def _do_submit(self, i: int) -> StepResult:
        if i == self.peak:
            return self.finish(True, f"Correct: the peak is at index {i} (a[{i}] = {self.values[i]}).")
        return self.finish(False, f"Wrong: index {i} is not the peak (it is {self.peak}).")

    def solve(self) -> str:
        lo, hi = 0, self.n - 1
        while lo < hi:
            m = (lo + hi) // 2
            sign = self.known.get((m, m + 1))
            if sign is None:
                if self.queries_left > 0:
                    return boxed("compare", m, m + 1)
                return boxed("submit", self.peak)  # budget spent elsewhere: privileged fallback
            if sign < 0:
                lo = m + 1
            else:
                hi = m
        return boxed("submit", lo)

    def sample_random_action(self) -> str:
        n = int(getattr(self, "n", 16))
        r = self.rng.random()
        i, j = (int(x) for x in self.rng.integers(0, n, size=2))
        if r < 0.4:
            return boxed("get", i)
        if r < 0.8:
            return boxed("compare", i, j)
        return boxed("submit", i)
