"""TopologicalSchedule: discover a goal task's transitive prerequisites and submit a valid build order."""

from __future__ import annotations

import heapq
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed


def topo_order(tasks: set[int], prereqs: dict[int, list[int]]) -> list[int]:
    """Kahn's algorithm over `tasks` (smallest ready id first, so the order is deterministic)."""
    indeg = {t: sum(1 for p in prereqs[t] if p in tasks) for t in tasks}
    users: dict[int, list[int]] = {t: [] for t in tasks}
    for t in tasks:
        for p in prereqs[t]:
            if p in tasks:
                users[p].append(t)
    ready = [t for t, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        t = heapq.heappop(ready)
        out.append(t)
        for u in users[t]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    return out


class TopologicalSchedule(CommandEnv):
    r"""Schedule a goal task together with exactly its transitive prerequisites, each after its own prerequisites.

    Tasks ``0..n-1`` form a hidden layered DAG; the goal sits in the top layer, so its prerequisite chains are
    ``depth`` long. Commands: ``\boxed{deps t}`` reveals task ``t``'s direct prerequisites (one query);
    ``\boxed{submit t1 t2 ...}`` ends the episode. The budget is the size of the goal's closure (every member must be
    inspected to be sure it has no further prerequisites) plus a slack that shrinks to 0 at level 10. The turn
    limit is the budget plus 3.

    Rewards: 1.0 when the submitted sequence is exactly the closure, without repeats, in a valid order (success);
    0.0 and episode end otherwise (the feedback names the first violation); 0.0 per query; -0.1 for a malformed
    command (base class). Unknown task ids are refused without spending budget.
    Complexity: more tasks (8 -> 60), deeper chains (2 -> 8 layers), more prerequisites per task, less slack.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="TopologicalSchedule",
        family="algorithm",
        domain="algorithm",
        description="Explore a hidden dependency DAG with deps queries and submit a valid schedule for a goal.",
        action_format=r"\boxed{deps <task>} or \boxed{submit <task> <task> ...}",
        max_turns=60,
    )
    complexity_params = {"tasks": (8, 60), "depth": (2, 8), "max_prereqs": (2, 4), "slack": (4, 0)}
    grammar = CommandGrammar({"deps": [int], "submit": [int, ...]})
    query_verbs = frozenset({"deps"})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n, depth = int(self.params["tasks"]), int(self.params["depth"])
        self.n = n
        labels = [int(x) for x in self.rng.permutation(n)]
        # one task per layer first so every layer is non-empty, the rest spread at random
        layer_of = list(range(depth)) + [int(x) for x in self.rng.integers(0, depth, size=n - depth)]
        layers: list[list[int]] = [[] for _ in range(depth)]
        for label, layer in zip(labels, layer_of):
            layers[layer].append(label)
        self.prereqs: dict[int, list[int]] = {t: [] for t in range(n)}
        for k in range(1, depth):
            below = [t for layer in layers[:k] for t in layer]
            for t in layers[k]:
                chosen = {self.pick(layers[k - 1])}  # one edge from the layer just below keeps chains deep
                for _ in range(int(self.rng.integers(0, int(self.params["max_prereqs"])))):
                    chosen.add(self.pick(below))
                self.prereqs[t] = sorted(chosen)
        self.goal = self.pick(layers[depth - 1])
        self.closure = self._closure(self.goal)
        self.inspected: set[int] = set()
        self.queries_left = len(self.closure) + int(self.params["slack"])
        self.params["max_turns"] = self.queries_left + 3
        obs = (
            f"Tasks 0..{n - 1} have hidden prerequisites. Schedule task {self.goal}: submit it together with "
            "exactly all of its direct and indirect prerequisites, each task after all of its prerequisites. "
            r"\boxed{deps t} reveals t's direct prerequisites; \boxed{submit t1 t2 ...} gives the schedule. "
            f"You may ask {self.queries_left} deps queries."
        )
        return obs, {"goal": self.goal, "query_budget": self.queries_left}

    def _closure(self, goal: int) -> set[int]:
        seen, stack = {goal}, [goal]
        while stack:
            for p in self.prereqs[stack.pop()]:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    def _do_deps(self, t: int) -> StepResult:
        if not 0 <= t < self.n:
            self.queries_left += 1  # refund: unknown ids reveal nothing
            return self.feedback(f"Task {t} does not exist; tasks are 0..{self.n - 1}.")
        self.inspected.add(t)
        pre = self.prereqs[t]
        if not pre:
            return self.feedback(f"Task {t} has no prerequisites.")
        return self.feedback(f"Task {t} requires: {', '.join(map(str, pre))}.")

    def _do_submit(self, *order: int) -> StepResult:
        problem = self.check_schedule(list(order))
        if problem is None:
            return self.finish(True, f"Valid schedule of {len(order)} tasks for goal {self.goal}.")
        return self.finish(False, f"Invalid schedule: {problem}.")

    def check_schedule(self, order: list[int]) -> str | None:
        """None if `order` is a valid schedule for the goal, else the first violation found."""
        seen: set[int] = set()
        for t in order:
            if t in seen:
                return f"task {t} appears twice"
            if t not in self.closure:
                return f"task {t} is not needed for goal {self.goal}"
            missing = [p for p in self.prereqs[t] if p not in seen]
            if missing:
                return f"task {t} comes before its prerequisite {missing[0]}"
            seen.add(t)
        left = sorted(self.closure - seen)
        return f"needed task(s) missing, e.g. {left[0]}" if left else None

    def solve(self) -> str:
        # Explore the closure as far as it is known; inspect the smallest known-but-uninspected member.
        known, stack = {self.goal}, [self.goal]
        pending: list[int] = []
        while stack:
            t = stack.pop()
            if t not in self.inspected:
                pending.append(t)
                continue
            for p in self.prereqs[t]:
                if p not in known:
                    known.add(p)
                    stack.append(p)
        if pending and self.queries_left > 0:
            return boxed("deps", min(pending))
        return boxed("submit", *topo_order(self.closure, self.prereqs))

    def sample_random_action(self) -> str:
        n = int(getattr(self, "n", 8))
        if self.rng.random() < 0.75:
            return boxed("deps", int(self.rng.integers(0, n)))
        k = int(self.rng.integers(1, n + 1))
        return boxed("submit", *(int(x) for x in self.rng.permutation(n)[:k]))
