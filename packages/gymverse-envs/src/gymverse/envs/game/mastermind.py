"""Mastermind: deduce a hidden color code from black/white peg feedback."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from gymverse.actions import ActionFormatError, parse_boxed
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult
from gymverse.text import plural


@lru_cache(maxsize=16)
def _code_table(pegs: int, colors: int) -> tuple[np.ndarray, np.ndarray]:
    """Every code of length `pegs` over `colors` (lexicographic) and each code's per-color counts."""
    codes = np.indices((colors,) * pegs).reshape(pegs, -1).T.astype(np.int8)
    counts = np.stack([(codes == c).sum(axis=1) for c in range(colors)], axis=1).astype(np.int8)
    codes.setflags(write=False)
    counts.setflags(write=False)
    return codes, counts


def score(secret: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """(black, white): right color in the right place, and right color in the wrong place."""
    if len(secret) != len(guess):
        raise ValueError(f"secret and guess lengths differ: {len(secret)} vs {len(guess)}")
    black = sum(s == g for s, g in zip(secret, guess))
    common = sum(min(secret.count(c), guess.count(c)) for c in set(guess))
    return black, common - black


def _agrees(
    codes: np.ndarray, counts: np.ndarray, colors: int, guess: tuple[int, ...], feedback: tuple[int, int]
) -> np.ndarray:
    """Boolean mask over the rows of `codes` (with per-color `counts`) that answer `guess` with `feedback`."""
    g = np.asarray(guess, dtype=np.int8)
    black = (codes == g).sum(axis=1)
    total = np.minimum(counts, np.bincount(g, minlength=colors)).sum(axis=1)
    return (black == feedback[0]) & (total - black == feedback[1])


def _alive(pegs: int, colors: int, history: list[tuple[tuple[int, ...], tuple[int, int]]]) -> np.ndarray:
    """Indices into `_code_table` of codes that agree with every (guess, feedback) so far."""
    codes, counts = _code_table(pegs, colors)
    idx = np.arange(len(codes))
    for guess, feedback in history:
        # filtering only the survivors keeps later rounds cheap (the set shrinks fast)
        idx = idx[_agrees(codes[idx], counts[idx], colors, guess, feedback)]
    return idx


def oracle_guess(pegs: int, colors: int, history: list[tuple[tuple[int, ...], tuple[int, int]]]) -> tuple[int, ...]:
    """The oracle's next guess: a fixed pair-pattern opener, then the first code consistent with all feedback."""
    if not history:
        return tuple((i // 2) % colors for i in range(pegs))
    codes, _ = _code_table(pegs, colors)
    return tuple(int(x) for x in codes[_alive(pegs, colors, history)[0]])


class Mastermind(Env):
    """Guess a hidden code of ``pegs`` colors (1..``colors``, repeats allowed) within the turn budget.

    Each guess ``\\boxed{1 3 3 2}`` is answered with black pegs (right color, right place) and white pegs (right
    color, wrong place). Rewards: 1.0 when the code is guessed (success), 0.0 for every other guess, -0.1 for a
    malformed action (wrong length, colors out of range, no box). Complexity grows the code length, the palette
    and shrinks the spare turns. The oracle opens with a pair pattern and then always plays the first code
    consistent with all feedback; secrets it cannot crack within the budget are redrawn from the env RNG, so
    every instance is solvable within ``max_turns``.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="Mastermind",
        family="game",
        domain="game",
        description="Deduce a hidden color code from black/white peg feedback.",
        action_format=r"\boxed{<color> <color> ...} (colors are digits 1..C)",
        max_turns=10,  # the most any level allows; the per-level budget is the max_turns param below
    )
    complexity_params = {
        "pegs": [3, 3, 4, 4, 4, 4, 5, 5, 5, 5],
        "colors": [4, 5, 5, 6, 6, 7, 7, 8, 8, 8],
        # Spare turns shrink with the level: the oracle always fits, a player who wastes guesses does not.
        "max_turns": [10, 10, 9, 9, 8, 8, 7, 7, 6, 6],
    }

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.pegs, self.colors = int(self.params["pegs"]), int(self.params["colors"])
        budget = int(self.params["max_turns"])
        for _ in range(200):
            secret = tuple(int(x) for x in self.rng.integers(0, self.colors, size=self.pegs))
            if self._oracle_turns(secret) <= budget:
                break
        else:  # pragma: no cover - the budgets above leave the oracle ample room
            budget = self._oracle_turns(secret)
        self.secret = secret
        self.params["max_turns"] = budget
        self.history: list[tuple[tuple[int, ...], tuple[int, int]]] = []
        obs = (
            f"I hid a code of {self.pegs} pegs, each a color 1..{self.colors} (repeats allowed). After each guess "
            "I report black pegs (right color, right place) and white pegs (right color, wrong place). "
            f"You have {plural(budget, 'guess', 'guesses')}. Answer like \\boxed{{{' '.join(['1'] * self.pegs)}}}."
        )
        return obs, {"pegs": self.pegs, "colors": self.colors}

    def _oracle_turns(self, secret: tuple[int, ...]) -> int:
        """How many guesses the oracle (same rule as `oracle_guess`) needs against `secret`, narrowing incrementally."""
        codes, counts = _code_table(self.pegs, self.colors)
        idx = np.arange(len(codes))
        guess = oracle_guess(self.pegs, self.colors, [])
        turns = 1
        while (fb := score(secret, guess))[0] != self.pegs:
            idx = idx[_agrees(codes[idx], counts[idx], self.colors, guess, fb)]
            guess = tuple(int(x) for x in codes[idx[0]])
            turns += 1
        return turns

    def _parse(self, action: str) -> tuple[int, ...]:
        body = parse_boxed(action, what=f"{self.pegs} colors")
        tokens = body.replace(",", " ").split()
        if len(tokens) == 1 and len(tokens[0]) == self.pegs:
            tokens = list(tokens[0])
        if len(tokens) != self.pegs:
            raise ActionFormatError(f"a guess needs exactly {self.pegs} colors, got {len(tokens)} in {body[:40]!r}")
        # ASCII digits only ("²" and "①" pass str.isdigit but not int()); short, so int() never sees 5000 digits
        if not all(t.isascii() and t.isdecimal() and len(t) <= 3 and 1 <= int(t) <= self.colors for t in tokens):
            raise ActionFormatError(f"colors must be digits 1..{self.colors}, got {body[:40]!r}")
        return tuple(int(t) - 1 for t in tokens)

    def _step(self, action: str) -> StepResult:
        guess = self._parse(action)
        black, white = score(self.secret, guess)
        self.history.append((guess, (black, white)))
        shown = " ".join(str(g + 1) for g in guess)
        if black == self.pegs:
            return StepResult(
                f"{shown}: {black} black. You cracked the code!",
                SUCCESS_REWARD,
                True,
                False,
                {"success": True, "black": black, "white": white},
            )
        left = self.max_turns - self.turn
        obs = f"{shown}: {black} black, {white} white. {plural(left, 'guess', 'guesses')} left."
        return StepResult(obs, 0.0, False, False, {"black": black, "white": white})

    def solve(self) -> str:
        guess = oracle_guess(self.pegs, self.colors, self.history)
        return r"\boxed{" + " ".join(str(g + 1) for g in guess) + "}"

    def sample_random_action(self) -> str:
        code = self.rng.integers(1, self.colors + 1, size=self.pegs)
        return r"\boxed{" + " ".join(str(int(c)) for c in code) + "}"
