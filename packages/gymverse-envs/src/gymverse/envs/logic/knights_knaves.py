"""KnightsAndKnaves: identify who always tells the truth from statements plus questions you pay turns for."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from gymverse.actions import ActionFormatError, CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult
from gymverse.envs.logic._puzzle import check_range
from gymverse.text import plural

#: (speaker, kind, args); kinds: "is" (args j, want), "same"/"differ" (j, k), "some_knave" (j, k), "count" (t,)
Statement = tuple[int, str, tuple[int, ...]]


@lru_cache(maxsize=16)
def _assignments(n: int) -> np.ndarray:
    """Every knight(True)/knave(False) assignment of `n` people, one per row."""
    table = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    table.setflags(write=False)
    return table


def claim_holds(stmt: Statement, a: np.ndarray) -> np.ndarray:
    """Whether the claim of `stmt` is true under each assignment row of `a`."""
    _, kind, args = stmt
    if kind == "is":
        return a[:, args[0]] == bool(args[1])
    if kind == "same":
        return a[:, args[0]] == a[:, args[1]]
    if kind == "differ":
        return a[:, args[0]] != a[:, args[1]]
    if kind == "some_knave":
        return ~(a[:, args[0]] & a[:, args[1]])
    if kind == "count":
        return a.sum(axis=1) == args[0]
    raise ValueError(f"unknown statement kind {kind!r}")


def consistent(stmt: Statement, a: np.ndarray) -> np.ndarray:
    """A knight's claim is true and a knave's is false: speaker is a knight iff the claim holds."""
    return a[:, stmt[0]] == claim_holds(stmt, a)


def describe(stmt: Statement, n: int) -> str:
    """The statement as the speaker would say it (people are numbered from 1)."""
    i, kind, args = stmt
    p = [x + 1 for x in args]
    text = {
        "is": lambda: f"{p[0]} is a {'knight' if args[1] else 'knave'}",
        "same": lambda: f"{p[0]} and {p[1]} are the same kind",
        "differ": lambda: f"{p[0]} and {p[1]} are different kinds",
        "some_knave": lambda: f"at least one of {p[0]} and {p[1]} is a knave",
        "count": lambda: f"exactly {args[0]} of the {n} of us are knights",
    }[kind]()
    return f'Person {i + 1} says: "{text}."'


class KnightsAndKnaves(Env):
    """``people`` islanders are knights (always truthful) or knaves (always lying); find out who is which.

    The opening lists a few statements. ``\\boxed{ask i j}`` asks person i "is person j a knight?" (costs a turn;
    the answer is yes exactly when i and j are the same kind). ``\\boxed{submit K N K ...}`` (one K/N per person)
    ends the episode: success iff every identity is right. The opening statements always leave several
    possibilities, so questions are needed and must be chosen well: the budget is what the oracle needs (it asks
    the question that splits the remaining possibilities most evenly, then submits) plus ``slack``. Rewards: 1.0
    on a correct submit, 0.0 per other turn, -0.1 for a malformed action (no box, unknown verb, person out of
    range, wrong number of K/N letters).
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="KnightsAndKnaves",
        family="logic",
        domain="logic",
        description="Deduce who are knights and knaves from statements and paid yes/no questions.",
        action_format=r"\boxed{ask <i> <j>} | \boxed{submit <K|N> ...}",
        max_turns=20,
    )
    complexity_params = {
        "people": [3, 4, 5, 5, 6, 7, 8, 9, 10, 12],
        "statement_ratio": [1.0, 1.0, 0.9, 0.8, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5],
        "min_left": [2, 2, 3, 4, 4, 6, 8, 8, 12, 16],
        "slack": [4, 3, 3, 2, 2, 2, 1, 1, 0, 0],
    }
    grammar = CommandGrammar({"ask": [int, int], "submit": [str, ...]})

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n = self.people = int(self.params["people"])
        table = _assignments(n)
        k = max(1, round(float(self.params["statement_ratio"]) * n))
        while True:
            self.truth = [bool(x) for x in self.rng.integers(0, 2, size=n)]
            self.statements = [self._random_statement() for _ in range(k)]
            mask = np.ones(len(table), dtype=bool)
            for stmt in self.statements:
                mask &= consistent(stmt, table)
            # answers only reveal who is the same kind as whom, so the statements must rule out the mirror world
            mirror = sum(1 << b for b, t in enumerate(self.truth) if not t)
            left = int(mask.sum())
            if left >= int(self.params["min_left"]) and not mask[mirror]:
                break
        self.answers: list[tuple[int, int, bool]] = []
        self.params["possibilities"] = left
        self.params["max_turns"] = self._oracle_questions(mask) + 1 + int(self.params["slack"])
        lines = "\n".join(describe(s, n) for s in self.statements)
        obs = (
            f"On this island {n} people (1..{n}) are each a knight (always tells the truth) or a knave (always "
            f"lies).\n{lines}\nAsk \\boxed{{ask i j}} to ask person i whether person j is a knight (costs a turn). "
            f"When sure, answer \\boxed{{submit ...}} with {n} letters K (knight) or N (knave) in order, e.g. "
            f"\\boxed{{submit {' '.join('K' * n)}}}. You have {plural(self.max_turns, 'turn')}."
        )
        return obs, {"people": n, "statements": k}

    def _random_statement(self) -> Statement:
        n = self.people
        while True:
            i = int(self.rng.integers(0, n))
            others = [x for x in range(n) if x != i]
            j, k = (int(x) for x in self.rng.choice(others, size=2, replace=n - 1 < 2))
            kind = ["is", "is", "same", "differ", "some_knave", "count"][int(self.rng.integers(0, 6))]
            args: tuple[int, ...] = (j, k)
            if kind == "is":
                args = (j, int(self.rng.integers(0, 2)))
            elif kind == "count":
                args = (int(self.rng.integers(0, n + 1)),)
            stmt: Statement = (i, kind, args)
            if kind in ("same", "differ", "some_knave") and j == k:
                continue
            if bool(consistent(stmt, np.asarray([self.truth]))[0]):
                return stmt

    def _possible(self) -> np.ndarray:
        table = _assignments(self.people)
        mask = np.ones(len(table), dtype=bool)
        for stmt in self.statements:
            mask &= consistent(stmt, table)
        for i, j, yes in self.answers:
            mask &= (table[:, i] == table[:, j]) == yes
        return mask

    def _best_question(self, mask: np.ndarray) -> tuple[int, int]:
        """The (i, j) whose answer splits the remaining assignments most evenly (first such pair)."""
        rows = _assignments(self.people)[mask]
        best, best_gap = (0, 1), len(rows) + 1
        for i in range(self.people):
            for j in range(i + 1, self.people):
                gap = abs(2 * int((rows[:, i] == rows[:, j]).sum()) - len(rows))
                if gap < best_gap:
                    best, best_gap = (i, j), gap
        return best

    def _oracle_questions(self, mask: np.ndarray) -> int:
        table, count = _assignments(self.people), 0
        truth = np.asarray(self.truth)
        while mask.sum() > 1:
            i, j = self._best_question(mask)
            mask = mask & ((table[:, i] == table[:, j]) == (truth[i] == truth[j]))
            count += 1
        return count

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        n = self.people
        if cmd.verb == "ask":
            i, j = check_range("person", cmd.args[0], n), check_range("person", cmd.args[1], n)
            yes = self.truth[i] == self.truth[j]
            self.answers.append((i, j, yes))
            obs = f'You ask person {i + 1} whether person {j + 1} is a knight. Answer: "{"Yes" if yes else "No"}."'
            return StepResult(obs, 0.0, False, False, {"answer": yes})
        letters = "".join(cmd.args).upper()
        if len(letters) != n or set(letters) - {"K", "N"}:
            raise ActionFormatError(f"submit needs exactly {n} letters K or N, got {letters[:40]!r}")
        guess = [ch == "K" for ch in letters]
        wrong = sum(g != t for g, t in zip(guess, self.truth))
        if wrong == 0:
            return StepResult("Correct! You identified everyone.", SUCCESS_REWARD, True, False, {"success": True})
        answer = " ".join("K" if t else "N" for t in self.truth)
        return StepResult(
            f"Wrong: {wrong} identities are wrong. The answer was {answer}.",
            0.0,
            True,
            False,
            {"success": False, "wrong": wrong},
        )

    def solve(self) -> str:
        mask = self._possible()
        if mask.sum() <= 1:
            return r"\boxed{submit " + " ".join("K" if t else "N" for t in self.truth) + "}"
        i, j = self._best_question(mask)
        return rf"\boxed{{ask {i + 1} {j + 1}}}"

    def sample_random_action(self) -> str:
        n = self.people
        if self.rng.random() < 0.1:
            return r"\boxed{submit " + " ".join("KN"[int(x)] for x in self.rng.integers(0, 2, size=n)) + "}"
        i, j = (int(x) for x in self.rng.integers(1, n + 1, size=2))
        return rf"\boxed{{ask {i} {j}}}"
