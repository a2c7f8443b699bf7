"""LightsOut: switch every light off; pressing a cell toggles it and its orthogonal neighbours."""

from __future__ import annotations

from itertools import product
from typing import Any

from gymverse.actions import ActionFormatError, CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult


def press_mask(size: int, r: int, c: int) -> int:
    """Bitmask (bit ``r*size+c``) of the cells a press at (r, c) toggles."""
    mask = 0
    for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
        rr, cc = r + dr, c + dc
        if 0 <= rr < size and 0 <= cc < size:
            mask |= 1 << (rr * size + cc)
    return mask


def min_presses(size: int, state: int) -> list[int]:
    """Cells (as indices) of a minimum-size press set that turns `state` off, by GF(2) elimination."""
    n = size * size
    # Row i of the augmented system: which presses toggle cell i (the press matrix is symmetric), plus rhs bit n.
    rows = [press_mask(size, i // size, i % size) | (((state >> i) & 1) << n) for i in range(n)]
    pivots: list[int] = []
    rank = 0
    for col in range(n):
        sel = next((k for k in range(rank, n) if (rows[k] >> col) & 1), None)
        if sel is None:
            continue
        rows[rank], rows[sel] = rows[sel], rows[rank]
        for k in range(n):
            if k != rank and (rows[k] >> col) & 1:
                rows[k] ^= rows[rank]
        pivots.append(col)
        rank += 1
    if any((rows[k] >> n) & 1 for k in range(rank, n)):
        raise ValueError("state is not solvable")
    free = [c for c in range(n) if c not in pivots]
    particular = 0
    for k, col in enumerate(pivots):
        if (rows[k] >> n) & 1:
            particular |= 1 << col
    basis = []
    for f in free:
        vec = 1 << f
        for k, col in enumerate(pivots):
            if (rows[k] >> f) & 1:
                vec |= 1 << col
        basis.append(vec)
    best = particular
    # The null space of the press matrix has dimension <= 8 for the sizes used, so enumerating it is cheap.
    for coeffs in product((0, 1), repeat=len(basis)):
        cand = particular
        for bit, vec in zip(coeffs, basis):
            if bit:
                cand ^= vec
        if cand.bit_count() < best.bit_count():
            best = cand
    return [i for i in range(n) if (best >> i) & 1]


class LightsOut(Env):
    """A ``size`` x ``size`` grid of lights; ``\\boxed{press r c}`` (1-based) toggles (r, c) and its 4 neighbours.

    Success when every light is off. The turn budget is the minimum number of presses plus ``slack``, so the agent
    must reason about the toggle algebra rather than explore. Rewards: 1.0 on success, 0.0 per other press, -0.1 for
    a malformed action (no box, unknown verb, coordinates off the board). The instance is made by pressing
    ``presses`` distinct random cells of a dark board; the oracle solves the GF(2) system for a minimum press set.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="LightsOut",
        family="game",
        domain="game",
        description="Turn all lights off; each press toggles a cell and its orthogonal neighbours.",
        action_format=r"\boxed{press <row> <col>}",
        max_turns=30,
    )
    complexity_params = {
        "size": [3, 3, 4, 4, 5, 5, 5, 6, 6, 7],
        "presses": [2, 3, 4, 5, 6, 8, 10, 12, 15, 20],
        "slack": [6, 5, 4, 4, 3, 3, 2, 2, 1, 0],
    }
    grammar = CommandGrammar({"press": [int, int]})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.size = int(self.params["size"])
        n = self.size * self.size
        k = min(int(self.params["presses"]), n)
        while True:
            cells = self.rng.choice(n, size=k, replace=False)
            state = 0
            for i in cells:
                state ^= press_mask(self.size, int(i) // self.size, int(i) % self.size)
            # at least two presses needed, so a constant "press r c" policy can never win
            if len(min_presses(self.size, state)) >= 2:
                break
        self.state = state
        self.optimal = len(min_presses(self.size, state))
        self.params["max_turns"] = self.optimal + int(self.params["slack"])
        obs = (
            f"Lights Out on a {self.size}x{self.size} board (1 = on, 0 = off). Pressing a cell toggles it and its "
            f"up/down/left/right neighbours. Turn every light off within {self.max_turns} presses. "
            f"Answer with \\boxed{{press <row> <col>}} (1-based).\n{self.render()}"
        )
        return obs, {"size": self.size, "optimal_presses": self.optimal}

    def render(self) -> str:
        """The board as rows of 0/1 with 1-based row and column labels."""
        s = self.size
        lines = ["    " + " ".join(str(c + 1) for c in range(s))]
        for r in range(s):
            bits = " ".join(str((self.state >> (r * s + c)) & 1) for c in range(s))
            lines.append(f"{r + 1:>2}  {bits}")
        return "\n".join(lines)

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        r, c = cmd.args
        if not (1 <= r <= self.size and 1 <= c <= self.size):
            raise ActionFormatError(f"cell ({r}, {c}) is off the board; rows and columns are 1..{self.size}")
        self.state ^= press_mask(self.size, r - 1, c - 1)
        lit = self.state.bit_count()
        if lit == 0:
            return StepResult(
                f"Pressed ({r}, {c}). All lights are off!", SUCCESS_REWARD, True, False, {"success": True, "lit": 0}
            )
        obs = f"Pressed ({r}, {c}). {lit} light(s) on:\n{self.render()}"
        return StepResult(obs, 0.0, False, False, {"lit": lit})

    def solve(self) -> str:
        cell = min_presses(self.size, self.state)[0]
        return rf"\boxed{{press {cell // self.size + 1} {cell % self.size + 1}}}"

    def sample_random_action(self) -> str:
        r, c = (int(x) for x in self.rng.integers(1, self.size + 1, size=2))
        return rf"\boxed{{press {r} {c}}}"
