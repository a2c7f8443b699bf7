"""HiddenGraphShortestPath: certify a shortest-path distance in a hidden weighted graph under a query budget."""

from __future__ import annotations

import heapq
from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed


def dijkstra(adj: dict[int, dict[int, int]], source: int) -> dict[int, int]:
    """Exact single-source distances over the full adjacency map."""
    dist = {source: 0}
    heap = [(0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v, w in adj[u].items():
            if d + w < dist.get(v, d + w + 1):
                dist[v] = d + w
                heapq.heappush(heap, (d + w, v))
    return dist


class HiddenGraphShortestPath(CommandEnv):
    r"""Find the shortest-path distance between two nodes of a hidden, connected, weighted undirected graph.

    Commands: ``\boxed{neighbors v}`` reveals node ``v``'s incident edges and weights (one query each, repeats
    included); ``\boxed{submit d}`` ends the episode. The budget equals the number of nodes that Dijkstra must expand
    (those strictly closer than the target) plus a slack that shrinks to 0 at level 10, so high levels demand an
    exact best-first expansion order that stops once the target is the closest unexpanded node. The turn limit
    is the budget plus 3 (the submission and two slips).

    Rewards: 1.0 for submitting the true distance (success); 0.0 and episode end for a wrong distance; 0.0 per
    query; -0.1 for a malformed command (base class). Querying a node outside ``0..n-1`` costs no budget.
    Complexity: more nodes, denser graphs, heavier weights, targets deeper in distance order, less slack.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="HiddenGraphShortestPath",
        family="algorithm",
        domain="algorithm",
        description="Query adjacency lists of a hidden weighted graph to certify a shortest-path distance.",
        action_format=r"\boxed{neighbors <node>} or \boxed{submit <distance>}",
        max_turns=80,
    )
    complexity_params = {
        "nodes": (6, 60),
        "extra_edges_pct": (20, 120),
        "max_weight": (5, 30),
        "target_depth_pct": (30, 80),
        "slack": (4, 0),
    }
    grammar = CommandGrammar({"neighbors": [int], "submit": [int]})
    query_verbs = frozenset({"neighbors"})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = int(self.params["nodes"])
        wmax = int(self.params["max_weight"])
        self.n = n
        self.adj: dict[int, dict[int, int]] = {v: {} for v in range(n)}
        order = [int(x) for x in self.rng.permutation(n)]
        for i in range(1, n):  # random spanning tree keeps the graph connected
            u, v = order[i], order[int(self.rng.integers(0, i))]
            self._add_edge(u, v, int(self.rng.integers(1, wmax + 1)))
        extra = n * int(self.params["extra_edges_pct"]) // 100
        for _ in range(extra):
            u, v = (int(x) for x in self.rng.integers(0, n, size=2))
            if u != v and v not in self.adj[u]:
                self._add_edge(u, v, int(self.rng.integers(1, wmax + 1)))
        self.source = order[0]
        dist = dijkstra(self.adj, self.source)
        ranked = sorted(range(n), key=lambda v: (dist[v], v))
        first = max(1, (n - 1) * int(self.params["target_depth_pct"]) // 100)
        self.target = ranked[int(self.rng.integers(first, n))]
        self.answer = dist[self.target]
        needed = sum(1 for v in range(n) if dist[v] < self.answer)
        self.queries_left = needed + int(self.params["slack"])
        self.revealed: set[int] = set()
        self.params["max_turns"] = self.queries_left + 3
        obs = (
            f"A hidden connected undirected graph has nodes 0..{n - 1} and positive integer edge weights. "
            f"Find the shortest-path distance from node {self.source} to node {self.target}. "
            r"\boxed{neighbors v} reveals v's edges; \boxed{submit d} gives your final answer. "
            f"You may ask {self.queries_left} neighbor queries."
        )
        return obs, {"source": self.source, "target": self.target, "query_budget": self.queries_left}

    def _add_edge(self, u: int, v: int, w: int) -> None:
        self.adj[u][v] = w
        self.adj[v][u] = w

    def _do_neighbors(self, v: int) -> StepResult:
        if not 0 <= v < self.n:
            self.queries_left += 1  # refund: an out-of-range node is a usage slip, not information
            return self.feedback(f"Node {v} does not exist; nodes are 0..{self.n - 1}.")
        self.revealed.add(v)
        edges = ", ".join(f"{u} (w={w})" for u, w in sorted(self.adj[v].items()))
        return self.feedback(f"Node {v} neighbors: {edges}.", node=v)

    def _do_submit(self, d: int) -> StepResult:
        if d == self.answer:
            return self.finish(True, f"Correct: the distance from {self.source} to {self.target} is {d}.")
        return self.finish(False, f"Wrong: {d} is not the shortest distance (it is {self.answer}).")

    def solve(self) -> str:
        # Dijkstra over what has been revealed; the first unrevealed node it would expand is the next query.
        # The target wins ties, so it is certified as soon as nothing strictly closer is left unexpanded.
        dist = {self.source: 0}
        heap = [(0, 0 if self.source == self.target else 1, self.source)]
        done: set[int] = set()
        while heap:
            d, _, u = heapq.heappop(heap)
            if u in done:
                continue
            if u == self.target:
                return boxed("submit", d)
            if u not in self.revealed:
                if self.queries_left > 0:
                    return boxed("neighbors", u)
                break
            done.add(u)
            for v, w in self.adj[u].items():
                if d + w < dist.get(v, d + w + 1):
                    dist[v] = d + w
                    heapq.heappush(heap, (d + w, 0 if v == self.target else 1, v))
        return boxed("submit", self.answer)  # budget spent elsewhere: fall back on privileged knowledge

    def sample_random_action(self) -> str:
        n = int(getattr(self, "n", 10))
        if self.rng.random() < 0.75:
            return boxed("neighbors", int(self.rng.integers(0, n)))
        wmax = int(self.params.get("max_weight", 10))
        return boxed("submit", int(self.rng.integers(0, wmax * max(2, n // 2) + 1)))
