"""TowerOfHanoi: move every disk onto the target peg, never placing a disk on a smaller one."""

from __future__ import annotations

from typing import Any

from gymverse.actions import ActionFormatError, CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult

PEGS = "ABC"


def optimal_moves(where: list[int], target: int) -> int:
    """Length of the shortest solution gathering every disk on `target`; ``where[d]`` is disk d's peg (d=0 smallest)."""
    total, goal = 0, target
    for d in range(len(where) - 1, -1, -1):
        if where[d] != goal:
            # disk d must move once, after the d smaller disks form a tower on the third peg (2**d - 1 moves)
            total += 1 << d
            goal = 3 - where[d] - goal
    return total


def next_move(where: list[int], target: int) -> tuple[int, int]:
    """The first move (from_peg, to_peg) of the optimal solution."""
    goal, pending = target, None
    for d in range(len(where) - 1, -1, -1):
        if where[d] != goal:
            pending = (where[d], goal)
            goal = 3 - where[d] - goal
    if pending is None:
        raise ValueError("already solved")
    # the smallest misplaced disk in the chain of sub-goals is the one free to move now
    return pending


class TowerOfHanoi(Env):
    """Three pegs A, B, C and ``disks`` disks; move them all onto the target peg, one top disk per turn.

    ``\\boxed{move A C}`` moves the top disk of A onto C. Placing a disk on a smaller one, or moving from an empty
    peg, is an illegal move: the state is unchanged and the observation says why. Rewards: 1.0 on success, 0.0 per
    other move (legal or not), -0.1 for a malformed action (no box, unknown verb or peg). From level 5 on the disks
    start scattered over the pegs in a random legal position (always with the largest disk off the target), so the
    textbook recursion must be adapted. The budget is the optimal move count (at least ``2**(disks-1)``) plus
    ``slack``; the oracle plays the optimal solution.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="TowerOfHanoi",
        family="game",
        domain="game",
        description="Move a tower of disks to a target peg, never placing a larger disk on a smaller one.",
        action_format=r"\boxed{move <from peg> <to peg>}",
        max_turns=300,
    )
    complexity_params = {
        "disks": [3, 3, 4, 4, 5, 5, 6, 6, 7, 8],
        "scrambled": [0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
        "slack": [8, 6, 5, 4, 3, 2, 2, 1, 1, 0],
    }
    grammar = CommandGrammar({"move": [str, str]})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = int(self.params["disks"])
        self.target = int(self.rng.integers(0, 3))
        if int(self.params["scrambled"]):
            where = [int(p) for p in self.rng.integers(0, 3, size=n)]
            # the largest disk off the target forces at least 2**(n-1) moves
            where[-1] = (self.target + int(self.rng.integers(1, 3))) % 3
        else:
            where = [(self.target + int(self.rng.integers(1, 3))) % 3] * n
        self.where = where
        self.optimal = optimal_moves(where, self.target)
        self.params["max_turns"] = self.optimal + int(self.params["slack"])
        obs = (
            f"Tower of Hanoi with {n} disks (1 = smallest). Move every disk onto peg {PEGS[self.target]}, one top "
            f"disk at a time, never onto a smaller disk. You have {self.max_turns} moves. Answer with "
            f"\\boxed{{move <from> <to>}}, e.g. \\boxed{{move A C}}.\n{self.render()}"
        )
        return obs, {"disks": n, "optimal_moves": self.optimal}

    def stacks(self) -> list[list[int]]:
        """Disks (1-based sizes) on each peg, bottom to top."""
        return [[d + 1 for d in range(len(self.where) - 1, -1, -1) if self.where[d] == p] for p in range(3)]

    def render(self) -> str:
        """One line per peg, bottom to top."""
        return "\n".join(f"{PEGS[p]}: {' '.join(map(str, s)) or '(empty)'}" for p, s in enumerate(self.stacks()))

    def _peg(self, name: str) -> int:
        key = name.strip().upper()
        if key in PEGS and len(key) == 1:
            return PEGS.index(key)
        if key in ("1", "2", "3"):
            return int(key) - 1
        raise ActionFormatError(f"unknown peg {name!r}; pegs are A, B, C")

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        src, dst = self._peg(cmd.args[0]), self._peg(cmd.args[1])
        stacks = self.stacks()
        if src == dst:
            return StepResult(
                f"Illegal move: source and target are both {PEGS[src]}.\n{self.render()}",
                0.0,
                False,
                False,
                {"illegal": True},
            )
        if not stacks[src]:
            return StepResult(
                f"Illegal move: peg {PEGS[src]} is empty.\n{self.render()}", 0.0, False, False, {"illegal": True}
            )
        disk = stacks[src][-1]
        if stacks[dst] and stacks[dst][-1] < disk:
            msg = f"Illegal move: disk {disk} cannot go on smaller disk {stacks[dst][-1]}.\n{self.render()}"
            return StepResult(msg, 0.0, False, False, {"illegal": True})
        self.where[disk - 1] = dst
        if all(p == self.target for p in self.where):
            return StepResult(
                f"Moved disk {disk} to {PEGS[dst]}. All disks are on {PEGS[dst]}!",
                SUCCESS_REWARD,
                True,
                False,
                {"success": True},
            )
        return StepResult(
            f"Moved disk {disk} from {PEGS[src]} to {PEGS[dst]}.\n{self.render()}",
            0.0,
            False,
            False,
            {"illegal": False},
        )

    def solve(self) -> str:
        src, dst = next_move(self.where, self.target)
        return rf"\boxed{{move {PEGS[src]} {PEGS[dst]}}}"

    def sample_random_action(self) -> str:
        src, dst = self.rng.choice(3, size=2, replace=False)
        return rf"\boxed{{move {PEGS[int(src)]} {PEGS[int(dst)]}}}"
