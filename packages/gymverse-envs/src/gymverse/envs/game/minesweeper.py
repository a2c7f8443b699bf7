"""Minesweeper: reveal every safe cell of a board that can be cleared by logic alone."""

from __future__ import annotations

from typing import Any

from gymverse.actions import ActionFormatError, CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult
from gymverse.text import plural

Cell = tuple[int, int]


def neighbours(size: int, r: int, c: int) -> list[Cell]:
    """The up-to-8 cells around (r, c) on a ``size`` x ``size`` board."""
    return [
        (r + dr, c + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < size and 0 <= c + dc < size
    ]


def flood_reveal(size: int, mines: frozenset[Cell], revealed: set[Cell], start: Cell) -> list[Cell]:
    """Reveal `start` (a safe cell) in place, spreading through zero cells; returns the newly revealed cells."""
    new, stack = [], [start]
    while stack:
        cell = stack.pop()
        if cell in revealed:
            continue
        revealed.add(cell)
        new.append(cell)
        nbrs = neighbours(size, *cell)
        if not any(n in mines for n in nbrs):
            stack.extend(n for n in nbrs if n not in revealed)
    return new


def logic_plan(size: int, mines: frozenset[Cell], revealed: set[Cell]) -> tuple[list[Cell], bool]:
    """Safe cells in an order where each is provable from what is visible before it, and whether they clear the board.

    Rules: a number whose unknown neighbours must be all safe / all mines, the subset rule between two constraints,
    and the global mine count. The board is only consulted for the numbers of cells already proven safe.
    """
    known = set(revealed)
    flagged: set[Cell] = set()
    plan: list[Cell] = []
    total_safe = size * size - len(mines)
    every = {(r, c) for r in range(size) for c in range(size)}
    while len(known) < total_safe:
        n_flags = len(flagged)
        cons: dict[frozenset[Cell], int] = {}
        for cell in known:
            nbrs = neighbours(size, *cell)
            unknown = frozenset(n for n in nbrs if n not in known and n not in flagged)
            if unknown:
                cons[unknown] = sum(n in mines for n in nbrs) - sum(n in flagged for n in nbrs)
        cons.setdefault(frozenset(every - known - flagged), len(mines) - len(flagged))
        safe: set[Cell] = set()
        for cells, m in cons.items():
            if m == 0:
                safe |= cells
            elif m == len(cells):
                flagged |= cells
        if not safe and len(flagged) == n_flags:
            by_cell: dict[Cell, list[frozenset[Cell]]] = {}
            for cells in cons:
                for cell in cells:
                    by_cell.setdefault(cell, []).append(cells)
            for a, ma in cons.items():
                for b in {b for cell in a for b in by_cell[cell]}:
                    if a < b:
                        diff, dm = b - a, cons[b] - ma
                        if dm == 0:
                            safe |= diff
                        elif dm == len(diff):
                            flagged |= diff
        if not safe and len(flagged) == n_flags:
            return plan, False
        for cell in sorted(safe):
            if cell not in known:
                plan.append(cell)
                flood_reveal(size, mines, known, cell)
    return plan, True


class Minesweeper(Env):
    """Clear a ``size`` x ``size`` board hiding ``mines`` mines; the first (zero) cell is revealed for you.

    ``\\boxed{reveal r c}`` opens a cell (1-based; zeros spread automatically), ``\\boxed{flag r c}`` toggles a
    bookkeeping flag. Opening a mine ends the episode in failure. Success when every safe cell is open. Every board
    is generated so that it can be cleared by pure deduction from the opening (boards the logic solver cannot
    finish are redrawn from the env RNG), so guessing is never required. Rewards: 1.0 on success, 0.0 otherwise
    (including the mine), -0.1 for a malformed action (no box, unknown verb, cell off the board). The budget is
    the number of safe cells still closed after the opening plus ``slack``; the oracle opens cells in the order
    the logic solver proves them safe.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="Minesweeper",
        family="game",
        domain="game",
        description="Open every safe cell of a Minesweeper board that is solvable by logic alone.",
        action_format=r"\boxed{reveal <row> <col>} or \boxed{flag <row> <col>}",
        max_turns=120,
    )
    complexity_params = {
        "size": [5, 6, 6, 7, 7, 8, 8, 9, 9, 10],
        "mines": [3, 4, 5, 7, 8, 10, 11, 13, 14, 17],
        "slack": [10, 8, 6, 5, 4, 3, 2, 2, 1, 0],
    }
    grammar = CommandGrammar({"reveal": [int, int], "flag": [int, int]})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.size = s = int(self.params["size"])
        n_mines = int(self.params["mines"])
        attempts = 0
        while True:
            attempts += 1
            start = (int(self.rng.integers(0, s)), int(self.rng.integers(0, s)))
            # first click is a guaranteed zero: keep its 3x3 block free of mines
            pool = [(r, c) for r in range(s) for c in range(s) if max(abs(r - start[0]), abs(c - start[1])) > 1]
            picks = self.rng.choice(len(pool), size=min(n_mines, len(pool)), replace=False)
            mines = frozenset(pool[int(i)] for i in picks)
            revealed: set[Cell] = set()
            flood_reveal(s, mines, revealed, start)
            plan, solvable = logic_plan(s, mines, revealed)
            # at least two separate openings, so one lucky click can never clear the board
            if solvable and len(plan) >= 2:
                break
            if attempts % 100 == 0:  # pragma: no cover - a safety valve; the densities above never need it
                n_mines -= 1
        self.mines, self.revealed, self.plan = mines, revealed, plan
        self.flags: set[Cell] = set()
        self.params["mines"] = len(mines)
        self.params["max_turns"] = s * s - len(mines) - len(revealed) + int(self.params["slack"])
        obs = (
            f"Minesweeper on a {s}x{s} board with {len(mines)} mines. '#' is closed, 'F' flagged, '.' an open "
            "cell with no adjacent mine, digits count adjacent mines. Open every safe cell without hitting a mine; "
            f"you have {plural(self.max_turns, 'turn')}. Answer with \\boxed{{reveal <row> <col>}} or "
            f"\\boxed{{flag <row> <col>}} (1-based).\n{self.render()}"
        )
        return obs, {"size": s, "mines": len(mines)}

    def _count(self, cell: Cell) -> int:
        return sum(n in self.mines for n in neighbours(self.size, *cell))

    def render(self) -> str:
        """The visible board with 1-based row/column labels."""
        s = self.size
        lines = ["    " + " ".join(str((c + 1) % 10) for c in range(s))]
        for r in range(s):
            row = []
            for c in range(s):
                if (r, c) in self.revealed:
                    k = self._count((r, c))
                    row.append(str(k) if k else ".")
                else:
                    row.append("F" if (r, c) in self.flags else "#")
            lines.append(f"{r + 1:>2}  {' '.join(row)}")
        return "\n".join(lines)

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        r, c = cmd.args
        if not (1 <= r <= self.size and 1 <= c <= self.size):
            raise ActionFormatError(f"cell ({r}, {c}) is off the board; rows and columns are 1..{self.size}")
        cell = (r - 1, c - 1)
        if cmd.verb == "flag":
            if cell in self.revealed:
                return StepResult(f"Cell ({r}, {c}) is already open.\n{self.render()}", 0.0, False, False, {})
            self.flags ^= {cell}
            state = "flagged" if cell in self.flags else "unflagged"
            return StepResult(f"Cell ({r}, {c}) {state}.\n{self.render()}", 0.0, False, False, {})
        if cell in self.revealed:
            return StepResult(f"Cell ({r}, {c}) is already open.\n{self.render()}", 0.0, False, False, {})
        if cell in self.mines:
            return StepResult(
                f"BOOM! ({r}, {c}) was a mine. Game over.", 0.0, True, False, {"success": False, "mine": True}
            )
        new = flood_reveal(self.size, self.mines, self.revealed, cell)
        self.flags -= self.revealed
        closed = self.size * self.size - len(self.mines) - len(self.revealed)
        if closed == 0:
            return StepResult(f"Opened ({r}, {c}). Board cleared!", SUCCESS_REWARD, True, False, {"success": True})
        obs = f"Opened ({r}, {c}): {len(new)} cell(s) revealed, {closed} safe cell(s) still closed.\n{self.render()}"
        return StepResult(obs, 0.0, False, False, {"opened": len(new)})

    def solve(self) -> str:
        todo = [cell for cell in self.plan if cell not in self.revealed]
        if not todo:  # the agent opened cells off the plan; deduce again from what is visible now
            self.plan, _ = logic_plan(self.size, self.mines, set(self.revealed))
            todo = self.plan
        r, c = todo[0]
        return rf"\boxed{{reveal {r + 1} {c + 1}}}"

    def sample_random_action(self) -> str:
        verb = "flag" if self.rng.random() < 0.15 else "reveal"
        r, c = (int(x) for x in self.rng.integers(1, self.size + 1, size=2))
        return rf"\boxed{{{verb} {r} {c}}}"
