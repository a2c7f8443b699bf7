"""UnitConversion: chain a conversion-table API and a calculator API to convert between made-up units."""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed
from gymverse.text import plural

UNITS = (
    "zorp", "blen", "kelt", "mirn", "quab", "trel", "vosk", "drem", "plin", "sarn", "gulm", "fesk", "yant", "hoob",
    "crim", "welt", "nusk", "baff", "jilt", "torm", "pask", "lume",
)  # fmt: skip
OPS = {"+": Fraction.__add__, "-": Fraction.__sub__, "*": Fraction.__mul__, "/": Fraction.__truediv__}


def show(x: Fraction) -> str:
    """Exact and decimal form of a rational number."""
    return str(x) if x.denominator == 1 else f"{x} (~{float(x):.6g})"


class UnitConversion(CommandEnv):
    r"""Convert a quantity between two made-up units using only a conversion-table API and a calculator API.

    The table only knows direct conversions between some pairs, so the agent must find a chain of units and
    multiply the factors along it. Commands: ``\boxed{units}``, ``\boxed{links A}`` (units with a direct
    conversion from A), ``\boxed{factor A B}`` ("1 A = f B" for a direct pair), ``\boxed{calc x op y}`` (exact
    rational arithmetic, op one of ``+ - * /``; numbers like ``3``, ``3/8`` or ``0.375``) and ``\boxed{submit x}``
    (ends the episode). Units are invented, so memorized conversion factors do not help.

    Rewards: 1.0 for the right amount, exact or within a relative error of 1e-6 (success); 0.0 and episode end
    otherwise; 0.0 per call, including calls on unknown units or pairs (the feedback says so); -0.1 for a
    malformed command (base class). The turn budget covers a breadth-first search of the table (a ``links`` call
    per unit closer than the target), a ``factor`` and a ``calc`` per hop and the submission, plus a slack that
    shrinks from 6 to 1. Complexity: more units (5 -> 22), longer chains (1 -> 6 hops), more cross links.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="UnitConversion",
        family="tool-use",
        domain="tool-use",
        description="Chain direct unit conversions found via a table API and multiply them out with a calculator API.",
        action_format=r"\boxed{units}, \boxed{links <A>}, \boxed{factor <A> <B>}, \boxed{calc <x> <op> <y>} "
        r"or \boxed{submit <x>}",
        max_turns=40,
    )
    complexity_params = {"units": (5, 22), "hops": (1, 6), "cross_links": (0, 6), "slack": (6, 1)}
    grammar = CommandGrammar(
        {"units": [], "links": [str], "factor": [str, str], "calc": [Fraction, str, Fraction], "submit": [Fraction]}
    )

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n, hops = int(self.params["units"]), int(self.params["hops"])
        self.names = [UNITS[int(i)] for i in self.rng.choice(len(UNITS), size=n, replace=False)]
        depth = list(range(hops + 1)) + [0] * (n - hops - 1)
        self.size = [Fraction(1)] * n  # each unit's size in a hidden base unit; factors are size ratios
        self.nbrs: list[set[int]] = [set() for _ in range(n)]
        for u in range(1, n):
            # units 0..hops form the chain from source to target; the rest hang off units of smaller depth
            parent = u - 1 if u <= hops else int(self.rng.integers(0, u))
            if u > hops:
                depth[u] = depth[parent] + 1
            r = int(self.rng.integers(2, 13))
            self.size[u] = self.size[parent] / r if self.rng.random() < 0.5 else self.size[parent] * r
            self._link(u, parent)
        for _ in range(int(self.params["cross_links"])):
            a, b = (int(x) for x in self.rng.integers(0, n, size=2))
            if a != b and abs(depth[a] - depth[b]) <= 1:  # cannot shorten any route from the source
                self._link(a, b)
        self.quantity = int(self.rng.integers(2, 60))
        self.answer = self.quantity * self.size[0] / self.size[hops]
        self.source, self.target = 0, hops
        self.plan = self._plan()
        self.executed: set[tuple[Any, ...]] = set()
        dist = self._bfs(self.source)
        explore = sum(1 for d in dist.values() if d < dist[self.target])
        self.params["max_turns"] = explore + 2 * hops + 1 + int(self.params["slack"])
        obs = (
            f"Convert {self.quantity} {self.names[0]} into {self.names[hops]}. The conversion table only knows "
            r"direct conversions between some pairs of units. Tools: \boxed{units}, \boxed{links A}, "
            r"\boxed{factor A B}, \boxed{calc x op y} (op: + - * /); answer with \boxed{submit x} "
            f"(a fraction like 3/8 or a decimal). You have {plural(self.params['max_turns'], 'turn')}."
        )
        return obs, {"source": self.names[0], "target": self.names[hops], "quantity": self.quantity}

    def _link(self, a: int, b: int) -> None:
        self.nbrs[a].add(b)
        self.nbrs[b].add(a)

    def _bfs(self, start: int) -> dict[int, int]:
        dist, queue = {start: 0}, deque([start])
        while queue:
            u = queue.popleft()
            for v in sorted(self.nbrs[u]):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        return dist

    def _plan(self) -> list[tuple[Any, ...]]:
        """The oracle's calls: links and factor along the source-target chain, then one calc per hop."""
        plan: list[tuple[Any, ...]] = []
        x = Fraction(self.quantity)
        for u in range(self.target):
            f = self.size[u] / self.size[u + 1]
            plan += [("links", self.names[u]), ("factor", self.names[u], self.names[u + 1]), ("calc", x, "*", f)]
            x *= f
        return plan

    def _unit(self, name: str) -> int | None:
        low = name.lower()
        return self.names.index(low) if low in self.names else None

    def _do_units(self) -> StepResult:
        return self.feedback("Units: " + ", ".join(sorted(self.names)) + ".")

    def _do_links(self, name: str) -> StepResult:
        u = self._unit(name)
        if u is None:
            return self.feedback(f"Unknown unit {name!r}; call units for the list.")
        self.executed.add(("links", self.names[u]))
        return self.feedback(
            f"{self.names[u]} converts directly to: " + ", ".join(sorted(self.names[v] for v in self.nbrs[u])) + "."
        )

    def _do_factor(self, a_name: str, b_name: str) -> StepResult:
        a, b = self._unit(a_name), self._unit(b_name)
        if a is None or b is None:
            return self.feedback(f"Unknown unit {(a_name if a is None else b_name)!r}; call units for the list.")
        if b not in self.nbrs[a]:
            return self.feedback(f"No direct conversion between {self.names[a]} and {self.names[b]}.")
        self.executed.add(("factor", self.names[a], self.names[b]))
        return self.feedback(f"1 {self.names[a]} = {self.size[a] / self.size[b]} {self.names[b]}.")

    def _do_calc(self, x: Fraction, op: str, y: Fraction) -> StepResult:
        if op not in OPS:
            return self.feedback(f"Unknown operator {op!r}; use one of + - * /.")
        if op == "/" and y == 0:
            return self.feedback("Division by zero.")
        self.executed.add(("calc", x, op, y))
        return self.feedback(f"{x} {op} {y} = {show(OPS[op](x, y))}")

    def _do_submit(self, x: Fraction) -> StepResult:
        unit = self.names[self.target]
        if x == self.answer or abs(x - self.answer) <= abs(self.answer) * Fraction(1, 10**6):
            return self.finish(True, f"Correct: {self.quantity} {self.names[0]} = {show(self.answer)} {unit}.")
        return self.finish(False, f"Wrong: {show(x)} {unit} is not right (it is {show(self.answer)} {unit}).")

    def solve(self) -> str:
        return self.follow_plan(self.plan, self.executed, self.answer)

    def sample_random_action(self) -> str:
        names = getattr(self, "names", list(UNITS[:5]))
        r = self.rng.random()
        a, b = self.pick(names), self.pick(names)
        if r < 0.1:
            return boxed("units")
        if r < 0.35:
            return boxed("links", a)
        if r < 0.6:
            return boxed("factor", a, b)
        x, y = (int(v) for v in self.rng.integers(1, 100, size=2))
        if r < 0.85:
            return boxed("calc", x, self.pick(list(OPS)), y)
        return boxed("submit", f"{x}/{y}")
