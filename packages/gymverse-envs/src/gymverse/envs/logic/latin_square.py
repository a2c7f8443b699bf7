"""LatinSquare: complete a partially filled n x n grid so every row and column holds each symbol once."""

from __future__ import annotations

from typing import Any

import numpy as np

from gymverse.actions import Command, CommandGrammar
from gymverse.core import EnvMetadata
from gymverse.envs.logic._puzzle import ConstraintPuzzle, check_range
from gymverse.text import plural


def _extend_row(row: list[int], c: int, used: list[set[int]], rng: np.random.Generator) -> bool:
    """Fill ``row[c:]`` with unused symbols avoiding each column's `used` set (randomized backtracking)."""
    n = len(row)
    if c == n:
        return True
    for v in (int(x) + 1 for x in rng.permutation(n)):
        if v not in row[:c] and v not in used[c]:
            row[c] = v
            if _extend_row(row, c + 1, used, rng):
                return True
    row[c] = 0
    return False


def random_latin_square(n: int, rng: np.random.Generator) -> list[list[int]]:
    """A random Latin square over 1..n, built row by row."""
    grid: list[list[int]] = []
    for _ in range(n):
        used = [{row[c] for row in grid} for c in range(n)]
        row = [0] * n
        # a Latin rectangle always extends by one row (Hall's theorem), so the search cannot fail
        _extend_row(row, 0, used, rng)
        grid.append(row)
    return grid


class LatinSquare(ConstraintPuzzle):
    """Fill an ``size`` x ``size`` grid with 1..size so no row or column repeats a symbol; some cells are given.

    Moves: ``\\boxed{place r c v}`` (overwrites a non-given cell), ``\\boxed{clear r c}``, ``\\boxed{check}`` (costs
    a turn; lists every duplicated symbol per row/column and the number of empty cells) and ``\\boxed{submit}``
    (ends the episode; success iff the grid is full and valid). Editing a given cell is an illegal move (no change).
    Any valid completion is accepted. Rewards: 1.0 on a successful submit, 0.0 per other turn, -0.1 for a malformed
    action (no box, unknown verb, wrong arity, row/column/value out of range). Complexity grows the grid and
    removes givens; the budget is the number of empty cells + 1 + ``slack``. The oracle writes a hidden solution.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="LatinSquare",
        family="logic",
        domain="logic",
        description="Complete a Latin square (each symbol once per row and column) with constraint checks.",
        action_format=r"\boxed{place <row> <col> <value>} | \boxed{clear <row> <col>} | \boxed{check} | \boxed{submit}",
        max_turns=60,
    )
    complexity_params = {
        "size": [4, 4, 4, 5, 5, 5, 6, 6, 7, 7],
        "given_frac": [0.6, 0.55, 0.5, 0.5, 0.45, 0.45, 0.4, 0.38, 0.35, 0.3],
        "slack": [8, 7, 6, 5, 4, 4, 3, 3, 2, 2],
    }
    grammar = CommandGrammar({"place": [int, int, int], "clear": [int, int], "check": [], "submit": []})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = self.size = int(self.params["size"])
        self.solution = random_latin_square(n, self.rng)
        k = max(1, round(float(self.params["given_frac"]) * n * n))
        picks = self.rng.choice(n * n, size=k, replace=False)
        self.given = {(int(i) // n, int(i) % n) for i in picks}
        self.grid = [[self.solution[r][c] if (r, c) in self.given else 0 for c in range(n)] for r in range(n)]
        self.params["max_turns"] = n * n - k + 1 + int(self.params["slack"])
        obs = (
            f"Latin square {n}x{n}: fill every '.' with a number 1..{n} so that each row and each column contains "
            f"every number exactly once. Given cells cannot change. You have {plural(self.max_turns, 'turn')}. Moves: "
            "\\boxed{place <row> <col> <value>}, \\boxed{clear <row> <col>}, \\boxed{check} (lists violated "
            f"constraints; costs a turn), \\boxed{{submit}} (final). Rows/columns are 1-based.\n{self.render()}"
        )
        return obs, {"size": n, "givens": k}

    def render(self) -> str:
        """The grid; given cells are marked with '*'."""
        n = self.size
        lines = ["     " + "  ".join(str(c + 1) for c in range(n))]
        for r in range(n):
            cells = []
            for c in range(n):
                v = self.grid[r][c]
                cells.append((str(v) if v else ".") + ("*" if (r, c) in self.given else " "))
            lines.append(f"{r + 1:>2}   " + " ".join(cells))
        return "\n".join(lines)

    def violations(self) -> list[str]:
        """Every symbol that appears more than once in a row or a column."""
        out = []
        n = self.size
        for kind, lines in (("row", self.grid), ("column", [[row[c] for row in self.grid] for c in range(n)])):
            for i, line in enumerate(lines):
                for v in sorted({x for x in line if x}):
                    if line.count(v) > 1:
                        out.append(f"{kind} {i + 1} contains {v} {line.count(v)} times")
        return out

    def unfilled(self) -> int:
        """Number of empty cells."""
        return sum(v == 0 for row in self.grid for v in row)

    def apply(self, cmd: Command) -> tuple[str, dict[str, Any]]:
        """Place or clear one cell."""
        r = check_range("row", cmd.args[0], self.size)
        c = check_range("column", cmd.args[1], self.size)
        if cmd.verb == "place":
            check_range("value", cmd.args[2], self.size)
        if (r, c) in self.given:
            return f"Illegal move: cell ({r + 1}, {c + 1}) is given and cannot change.", {"illegal": True}
        if cmd.verb == "clear":
            self.grid[r][c] = 0
            return f"Cleared ({r + 1}, {c + 1}).", {"illegal": False}
        self.grid[r][c] = int(cmd.args[2])
        return f"Placed {cmd.args[2]} at ({r + 1}, {c + 1}).", {"illegal": False}

    def oracle_edit(self) -> str | None:
        """Overwrite the first cell that differs from the hidden solution."""
        for r in range(self.size):
            for c in range(self.size):
                if self.grid[r][c] != self.solution[r][c]:
                    return f"place {r + 1} {c + 1} {self.solution[r][c]}"
        return None

    def sample_random_action(self) -> str:
        roll = float(self.rng.random())
        r, c, v = (int(x) for x in self.rng.integers(1, self.size + 1, size=3))
        if roll < 0.05:
            return r"\boxed{submit}"
        if roll < 0.15:
            return r"\boxed{check}"
        if roll < 0.25:
            return rf"\boxed{{clear {r} {c}}}"
        return rf"\boxed{{place {r} {c} {v}}}"
