"""GraphColoring: color the vertices of a graph so no edge joins two vertices of the same color."""

from __future__ import annotations

from typing import Any

from gymverse.actions import Command, CommandGrammar
from gymverse.core import EnvMetadata
from gymverse.envs.logic._puzzle import ConstraintPuzzle, check_range
from gymverse.text import plural


class GraphColoring(ConstraintPuzzle):
    """Give each of ``nodes`` vertices one of ``colors`` colors so that every edge joins two different colors.

    The graph hides a planted proper coloring (edges only join vertices of different planted classes), so a
    solution always exists; any proper coloring is accepted. Moves: ``\\boxed{color v c}``, ``\\boxed{clear v}``,
    ``\\boxed{check}`` (costs a turn; lists every monochromatic edge and the number of uncolored vertices) and
    ``\\boxed{submit}`` (ends the episode; success iff all vertices are colored and no edge is monochromatic).
    Rewards: 1.0 on a successful submit, 0.0 per other turn, -0.1 for a malformed action (no box, unknown verb,
    vertex or color out of range). Complexity grows the graph, its density and the palette; the budget is
    ``nodes + 1 + slack``. The oracle writes the planted coloring.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="GraphColoring",
        family="logic",
        domain="logic",
        description="Properly color a graph with k colors, using paid constraint checks.",
        action_format=r"\boxed{color <vertex> <color>} | \boxed{clear <vertex>} | \boxed{check} | \boxed{submit}",
        max_turns=40,
    )
    complexity_params = {
        "nodes": [5, 6, 7, 8, 9, 10, 12, 13, 14, 16],
        "colors": [3, 3, 3, 3, 3, 4, 4, 4, 4, 4],
        "edge_prob": [0.4, 0.45, 0.5, 0.5, 0.55, 0.6, 0.6, 0.65, 0.65, 0.7],
        "slack": [6, 5, 5, 4, 4, 3, 3, 2, 2, 2],
    }
    grammar = CommandGrammar({"color": [int, int], "clear": [int], "check": [], "submit": []})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n, k = int(self.params["nodes"]), int(self.params["colors"])
        self.nodes, self.colors = n, k
        p = float(self.params["edge_prob"])
        # every class is used, so the palette size is really needed for the planted solution
        planted = [i % k for i in range(n)]
        self.planted = [int(x) + 1 for x in self.rng.permutation(planted)]
        self.edges = [
            (u, v)
            for u in range(n)
            for v in range(u + 1, n)
            if self.planted[u] != self.planted[v] and float(self.rng.random()) < p
        ]
        self.coloring = [0] * n
        self.params["max_turns"] = n + 1 + int(self.params["slack"])
        edge_text = ", ".join(f"{u + 1}-{v + 1}" for u, v in self.edges)
        obs = (
            f"Graph coloring: vertices 1..{n}, colors 1..{k}. Edges: {edge_text}. Color every vertex so that no "
            f"edge joins two vertices of the same color. You have {plural(self.max_turns, 'turn')}. Moves: "
            "\\boxed{color <vertex> <color>}, \\boxed{clear <vertex>}, \\boxed{check} (lists violated "
            f"constraints; costs a turn), \\boxed{{submit}} (final).\n{self.render()}"
        )
        return obs, {"nodes": n, "colors": k, "edges": len(self.edges)}

    def render(self) -> str:
        """Current color of every vertex ('-' when uncolored)."""
        return "Coloring: " + " ".join(f"{v + 1}:{c or '-'}" for v, c in enumerate(self.coloring))

    def violations(self) -> list[str]:
        """Every edge whose two ends share a color."""
        return [
            f"edge {u + 1}-{v + 1}: both vertices have color {self.coloring[u]}"
            for u, v in self.edges
            if self.coloring[u] and self.coloring[u] == self.coloring[v]
        ]

    def unfilled(self) -> int:
        """Number of uncolored vertices."""
        return self.coloring.count(0)

    def apply(self, cmd: Command) -> tuple[str, dict[str, Any]]:
        """Color or clear one vertex."""
        v = check_range("vertex", cmd.args[0], self.nodes)
        if cmd.verb == "clear":
            self.coloring[v] = 0
            return f"Cleared vertex {v + 1}.", {}
        check_range("color", cmd.args[1], self.colors)
        self.coloring[v] = int(cmd.args[1])
        return f"Vertex {v + 1} colored {cmd.args[1]}.", {}

    def oracle_edit(self) -> str | None:
        """Recolor the first vertex that differs from the planted coloring."""
        for v, (have, want) in enumerate(zip(self.coloring, self.planted)):
            if have != want:
                return f"color {v + 1} {want}"
        return None

    def sample_random_action(self) -> str:
        roll = float(self.rng.random())
        v, c = int(self.rng.integers(1, self.nodes + 1)), int(self.rng.integers(1, self.colors + 1))
        if roll < 0.05:
            return r"\boxed{submit}"
        if roll < 0.15:
            return r"\boxed{check}"
        if roll < 0.25:
            return rf"\boxed{{clear {v}}}"
        return rf"\boxed{{color {v} {c}}}"
