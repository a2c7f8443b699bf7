"""Nonogram: paint a grid whose row and column run-length clues are given."""

from __future__ import annotations

from typing import Any

from gymverse.actions import ActionFormatError, Command, CommandGrammar
from gymverse.core import EnvMetadata
from gymverse.envs.logic._puzzle import ConstraintPuzzle, check_range
from gymverse.text import plural


def runs(line: list[int]) -> list[int]:
    """Lengths of the maximal blocks of filled (1) cells, left to right; ``[0]`` for an empty line."""
    out, count = [], 0
    for x in line:
        if x == 1:
            count += 1
        elif count:
            out.append(count)
            count = 0
    if count:
        out.append(count)
    return out or [0]


class Nonogram(ConstraintPuzzle):
    """Paint a ``size`` x ``size`` grid so that each row's and column's blocks of filled cells match its clue.

    A clue like ``3 1`` means a block of 3 filled cells, then (after at least one gap) a block of 1. Cells start
    unknown (``?``). Moves: ``\\boxed{row r 1101.}`` / ``\\boxed{col c 0110.}`` set a whole line (``1``/``#`` filled,
    ``0``/``.`` empty, ``?`` unknown), ``\\boxed{check}`` (costs a turn; lists every row/column whose blocks differ
    from its clue and the number of unknown cells), ``\\boxed{submit}`` (ends the episode; success iff no cell is
    unknown and every clue holds). Any grid satisfying all clues is accepted. Rewards: 1.0 on a successful submit,
    0.0 per other turn, -0.1 for a malformed action. Complexity grows the grid; the budget is ``size + 1 + slack``
    line writes. The oracle writes the hidden picture row by row.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="Nonogram",
        family="logic",
        domain="logic",
        description="Paint a nonogram from row/column run clues, one line per turn, with paid constraint checks.",
        action_format=r"\boxed{row <r> <cells>} | \boxed{col <c> <cells>} | \boxed{check} | \boxed{submit}",
        max_turns=30,
    )
    complexity_params = {
        "size": [4, 4, 5, 5, 6, 7, 7, 8, 9, 10],
        "fill": [0.6, 0.6, 0.55, 0.55, 0.55, 0.5, 0.5, 0.5, 0.5, 0.5],
        "slack": [6, 5, 5, 4, 4, 3, 3, 2, 2, 1],
    }
    grammar = CommandGrammar({"row": [int, str, ...], "col": [int, str, ...], "check": [], "submit": []})
    _SYMBOLS = {"1": 1, "#": 1, "0": 0, ".": 0, "?": -1}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = self.size = int(self.params["size"])
        fill = float(self.params["fill"])
        while True:
            self.picture = [[int(self.rng.random() < fill) for _ in range(n)] for _ in range(n)]
            # an all-empty or all-full picture has trivial clues
            if 0 < sum(map(sum, self.picture)) < n * n:
                break
        self.row_clues = [runs(row) for row in self.picture]
        self.col_clues = [runs([row[c] for row in self.picture]) for c in range(n)]
        self.grid = [[-1] * n for _ in range(n)]
        self.params["max_turns"] = n + 1 + int(self.params["slack"])
        rows = "\n".join(f"  row {i + 1}: {' '.join(map(str, c))}" for i, c in enumerate(self.row_clues))
        cols = "\n".join(f"  col {i + 1}: {' '.join(map(str, c))}" for i, c in enumerate(self.col_clues))
        obs = (
            f"Nonogram {n}x{n}. Each clue lists the lengths of the blocks of filled cells in order (0 = none).\n"
            f"Row clues:\n{rows}\nColumn clues:\n{cols}\nYou have {plural(self.max_turns, 'turn')}. Moves: "
            f"\\boxed{{row <r> <{n} cells>}} or \\boxed{{col <c> <{n} cells>}} with 1 = filled, 0 = empty, "
            "? = unknown; \\boxed{check} (lists violated clues; costs a turn); \\boxed{submit} (final).\n"
            f"{self.render()}"
        )
        return obs, {"size": n}

    def render(self) -> str:
        """The grid: '#' filled, '.' empty, '?' unknown."""
        sym = {1: "#", 0: ".", -1: "?"}
        return "\n".join(f"{r + 1:>2} " + "".join(sym[x] for x in row) for r, row in enumerate(self.grid))

    def violations(self) -> list[str]:
        """Every fully known row/column whose blocks differ from its clue."""
        out = []
        n = self.size
        lines = [("row", i, self.grid[i], self.row_clues[i]) for i in range(n)]
        lines += [("column", i, [row[i] for row in self.grid], self.col_clues[i]) for i in range(n)]
        for kind, i, line, clue in lines:
            if -1 not in line and runs(line) != clue:
                got, want = " ".join(map(str, runs(line))), " ".join(map(str, clue))
                out.append(f"{kind} {i + 1} has blocks {got} but the clue is {want}")
        return out

    def unfilled(self) -> int:
        """Number of unknown cells."""
        return sum(x == -1 for row in self.grid for x in row)

    def apply(self, cmd: Command) -> tuple[str, dict[str, Any]]:
        """Overwrite one row or column."""
        kind = "row" if cmd.verb == "row" else "column"
        i = check_range(kind, cmd.args[0], self.size)
        # "row 2 1 1 0 1" and "row 2 1101" mean the same line
        text = "".join(str(a) for a in cmd.args[1:])
        if len(text) != self.size or any(ch not in self._SYMBOLS for ch in text):
            raise ActionFormatError(f"{kind} cells must be exactly {self.size} of 1/#, 0/. or ?, got {text[:40]!r}")
        values = [self._SYMBOLS[ch] for ch in text]
        for j, x in enumerate(values):
            if cmd.verb == "row":
                self.grid[i][j] = x
            else:
                self.grid[j][i] = x
        return f"Set {kind} {i + 1}.", {}

    def oracle_edit(self) -> str | None:
        """Rewrite the first row that differs from the hidden picture."""
        for r in range(self.size):
            if self.grid[r] != self.picture[r]:
                return f"row {r + 1} " + "".join(map(str, self.picture[r]))
        return None

    def sample_random_action(self) -> str:
        roll = float(self.rng.random())
        i = int(self.rng.integers(1, self.size + 1))
        cells = "".join(str(int(x)) for x in self.rng.integers(0, 2, size=self.size))
        if roll < 0.05:
            return r"\boxed{submit}"
        if roll < 0.15:
            return r"\boxed{check}"
        verb = "row" if roll < 0.6 else "col"
        return rf"\boxed{{{verb} {i} {cells}}}"
