"""IntervalScheduling: pick a maximum set of non-overlapping hidden intervals with an earliest-finish oracle."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed


def greedy_schedule(intervals: list[tuple[int, int]]) -> list[int]:
    """Earliest-finish-first maximum set of pairwise disjoint half-open intervals (ties: smaller id)."""
    chosen: list[int] = []
    t = min((s for s, _ in intervals), default=0)
    for i in sorted(range(len(intervals)), key=lambda i: (intervals[i][1], i)):
        if intervals[i][0] >= t:
            chosen.append(i)
            t = intervals[i][1]
    return chosen


class IntervalScheduling(CommandEnv):
    r"""Submit a largest set of pairwise non-overlapping intervals from a hidden list of half-open ``[start, end)``.

    Commands: ``\boxed{get i}`` reveals interval ``i``; ``\boxed{first_end t}`` reveals, among the intervals that
    start at or after time ``t``, the one that ends earliest (ties: smaller id); both cost one query.
    ``\boxed{submit i j ...}`` ends the episode. The budget is the optimum size plus one (the final "none" answer)
    plus a slack shrinking to 0 at level 10, so reading every interval is impossible at high levels and the agent has
    to run the earliest-finish greedy through ``first_end``. The turn limit is the budget plus 3.

    Rewards: 1.0 for a valid set of maximum size (success); 0.0 and episode end for overlapping, unknown, repeated or
    too few intervals (the feedback names the problem); 0.0 per query; -0.1 for a malformed command (base class).
    Complexity: more intervals (8 -> 80) over a longer horizon, less slack.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="IntervalScheduling",
        family="algorithm",
        domain="algorithm",
        description="Query hidden intervals and submit a maximum set of pairwise non-overlapping ones.",
        action_format=r"\boxed{get <i>}, \boxed{first_end <t>} or \boxed{submit <i> <j> ...}",
        max_turns=40,
    )
    complexity_params = {"intervals": (8, 80), "horizon": (40, 600), "max_length": (12, 40), "slack": (4, 0)}
    grammar = CommandGrammar({"get": [int], "first_end": [int], "submit": [int, ...]})
    query_verbs = frozenset({"get", "first_end"})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n, horizon, longest = (int(self.params[k]) for k in ("intervals", "horizon", "max_length"))
        starts = self.rng.integers(0, horizon, size=n)
        lengths = self.rng.integers(1, longest + 1, size=n)
        self.intervals: list[tuple[int, int]] = [(int(s), int(s + d)) for s, d in zip(starts, lengths)]
        self.optimum = len(greedy_schedule(self.intervals))
        self.answered: dict[int, int | None] = {}  # first_end answers the agent has received, by time
        self.queries_left = self.optimum + 1 + int(self.params["slack"])
        self.params["max_turns"] = self.queries_left + 3
        obs = (
            f"There are {n} hidden intervals [start, end) numbered 0..{n - 1}, with times in 0..{horizon + longest}; "
            "intervals that only touch (one ends where the other starts) do not overlap. Submit a largest possible "
            r"set of pairwise non-overlapping intervals with \boxed{submit i j ...}. Queries: \boxed{get i}, "
            rf"\boxed{{first_end t}} (the earliest-ending interval that starts at or after t). "
            f"You may ask {self.queries_left} queries."
        )
        return obs, {"intervals": n, "query_budget": self.queries_left}

    def _show(self, i: int) -> str:
        s, e = self.intervals[i]
        return f"interval {i} = [{s}, {e})"

    def _do_get(self, i: int) -> StepResult:
        if not 0 <= i < len(self.intervals):
            self.queries_left += 1  # refund: unknown ids reveal nothing
            return self.feedback(f"Interval {i} does not exist; ids are 0..{len(self.intervals) - 1}.")
        return self.feedback(self._show(i).capitalize() + ".")

    def _do_first_end(self, t: int) -> StepResult:
        later = [i for i, (s, _) in enumerate(self.intervals) if s >= t]
        best = min(later, key=lambda i: (self.intervals[i][1], i)) if later else None
        self.answered[t] = best
        if best is None:
            return self.feedback(f"No interval starts at or after {t}.")
        return self.feedback(f"Earliest-ending interval starting at or after {t}: {self._show(best)}.")

    def check(self, ids: list[int]) -> str | None:
        """None if `ids` is a maximum set of pairwise disjoint intervals, else what is wrong with it."""
        if any(not 0 <= i < len(self.intervals) for i in ids):
            return "it names an interval that does not exist"
        if len(set(ids)) != len(ids):
            return "it repeats an interval"
        ordered = sorted(ids, key=lambda i: self.intervals[i])
        for a, b in pairwise(ordered):
            if self.intervals[a][1] > self.intervals[b][0]:
                return f"{self._show(a)} overlaps {self._show(b)}"
        if len(ids) < self.optimum:
            return f"it is valid but has {len(ids)} intervals; the maximum is {self.optimum}"
        return None

    def _do_submit(self, *ids: int) -> StepResult:
        problem = self.check(list(ids))
        if problem is None:
            return self.finish(True, f"Correct: {len(ids)} non-overlapping intervals is the maximum.")
        return self.finish(False, f"Wrong: {problem}.")

    def solve(self) -> str:
        chosen: list[int] = []
        t = 0
        while t in self.answered:
            best = self.answered[t]
            if best is None:
                return boxed("submit", *chosen)
            chosen.append(best)
            t = self.intervals[best][1]
        if self.queries_left > 0:
            return boxed("first_end", t)
        return boxed("submit", *greedy_schedule(self.intervals))  # budget spent elsewhere: privileged fallback

    def sample_random_action(self) -> str:
        n = len(getattr(self, "intervals", [])) or 8
        r = self.rng.random()
        if r < 0.4:
            return boxed("get", int(self.rng.integers(0, n)))
        if r < 0.8:
            return boxed("first_end", int(self.rng.integers(0, int(self.params.get("horizon", 40)))))
        k = int(self.rng.integers(1, n + 1))
        return boxed("submit", *(int(x) for x in self.rng.permutation(n)[:k]))
