r"""When two constant answers are one answer: judged by how the env treats them, never by their text.

An env may read ``\boxed{zero}`` as ``\boxed{0}`` (one answer, two spellings) or ``\boxed{a}`` apart from
``\boxed{A}`` (two answers); no text rule knows which. The probe already has each constant's whole episode on
every instance (the batched constants request returns the transcripts), so it records what each step did as data
(`step_outcome`) and `Outcomes` decides: two answers are one when the env treated them identically on every
instance where both were played (same rewards, end flags, success, format errors and next observations) and lost
on one of them. "Both lead to the same next state" alone cannot tell an alias from an env that accepts a wrong
answer (both end solved there); the other instances can: a wrong answer accepted on one instance behaves
differently from the right one on another. Answers the env never rejects give no such evidence, so they stay
distinct.

Observations are compared with the two answers' own text blanked out (as a whole token, in both), so an env that
echoes the answer (``you said answer 0``) does not make two spellings differ, while a hint that depends on the
answer (``comes after A`` / ``comes before a``) does. That blanking matches strings the evaluator wrote; nothing
the env says is interpreted.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gymverse.evaluate.answers import _BOXED

#: An instance of an env: (level, seed).
Instance = tuple[int, int]
#: Longer observations are kept as a digest: compared exactly, but not blanked.
OBS_KEPT = 1000
#: Characters of a differing value kept in the evidence.
SHOWN = 300
#: What an answer's own text becomes in an observation before two are compared.
BLANK = "<answer>"


def step_outcome(res: Any) -> dict[str, Any]:
    """What one step did, as data: next observation, reward, end flags, success, and the env's format error."""
    obs = str(res.observation)
    if len(obs) > OBS_KEPT:
        obs = "#" + hashlib.blake2b(obs.encode(), digest_size=16).hexdigest()
    info = res.info if isinstance(res.info, dict) else {}
    reward = float(res.reward)
    return {"observation": obs, "reward": "nan" if math.isnan(reward) else round(reward, 9),
            "terminated": bool(res.terminated), "truncated": bool(res.truncated),
            "success": info.get("success") is True, "format_error": info.get("format_error") is True}  # fmt: skip


def _blanker(actions: Iterable[str]) -> re.Pattern[str]:
    """A pattern matching the actions and their boxed text as whole tokens, longest first."""
    texts: set[str] = set()
    for action in actions:
        texts.add(action)
        m = _BOXED.search(action)
        if m and m.group(1).strip():
            texts.add(m.group(1).strip())
    alternatives = "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")


#: Fields of a step compared in this order, so a difference is named by what the env decided before what it said.
FIELDS = ("success", "reward", "terminated", "truncated", "format_error", "observation")


def step_difference(
    a: list[dict[str, Any]], b: list[dict[str, Any]], blank: re.Pattern[str]
) -> tuple[int, str, Any, Any] | None:
    """Where two episodes' steps first differ, as (step, field, value in a, value in b), observations with `blank`
    blanked; (steps in both, ``"steps"``, ...) when one episode is a prefix of the other; None when they are alike."""
    for i, (x, y) in enumerate(zip(a, b)):
        for field in FIELDS:
            vx, vy = x[field], y[field]
            if field == "observation":
                vx, vy = blank.sub(BLANK, vx), blank.sub(BLANK, vy)
            if vx != vy:
                return i, field, vx, vy
    return None if len(a) == len(b) else (min(len(a), len(b)), "steps", len(a), len(b))


def _cut(value: Any) -> Any:
    return value[: SHOWN - 3] + "..." if isinstance(value, str) and len(value) > SHOWN else value


class Outcomes:
    """Each constant answer's episode on each instance ``(level, seed)``: its steps (`step_outcome`) and whether
    it won; which winning answers are one answer to the env (`wrong_wins`)."""

    def __init__(self) -> None:
        self.played: dict[str, dict[Instance, tuple[list[dict[str, Any]], bool]]] = {}
        self._judged: dict[frozenset[str], bool] = {}

    def add(self, action: str, instance: Instance, steps: list[dict[str, Any]], won: bool) -> None:
        """Record one finished episode (not one that crashed or hung: it says nothing of the answer's meaning)."""
        self.played.setdefault(action, {})[instance] = (steps, won)
        self._judged.clear()

    def difference(self, a: str, b: str) -> dict[str, Any] | None:
        """The first instance both answers were played on where the env treated them differently: its level and
        seed, the step (0 is the first) and field, and both values; None when it treated them alike everywhere."""
        blank = _blanker((a, b))
        pa, pb = self.played.get(a, {}), self.played.get(b, {})
        for inst in sorted(pa.keys() & pb.keys()):
            found = step_difference(pa[inst][0], pb[inst][0], blank)
            if found is not None:
                step, field, x, y = found
                return {"level": inst[0], "seed": inst[1], "step": step, "field": field, "values": [_cut(x), _cut(y)]}
        return None

    def rejects(self, a: str, b: str) -> bool:
        """Has the env shown it can turn down what `a` and `b` say: did they lose on an instance both were played
        on? An answer never rejected cannot be told from a wrong one the env accepts (nor, in an env whose answer
        never changes, from the right one: then a constant wins, a defect either way), so it is never excused."""
        mine = self.played.get(a, {})
        return any(not mine[i][1] for i in mine.keys() & self.played.get(b, {}).keys())

    def one_answer(self, a: str, b: str) -> bool:
        """`a` and `b` are one answer to the env: it treated them identically on every instance where both were
        played, and has shown it can reject what they say (`rejects`)."""
        if a == b:
            return True
        pair = frozenset((a, b))
        if pair not in self._judged:  # an env that accepts anything asks this of every pair on every instance
            self._judged[pair] = self.difference(a, b) is None and self.rejects(a, b)
        return self._judged[pair]

    def wrong_wins(self, winners: Mapping[Instance, list[str]], limit: int = 3) -> tuple[int, list[dict[str, Any]]]:
        """Instances where two answers that are not one answer (`one_answer`) both won: how many, and the first
        `limit` with both answers and where the env told them apart (``differ``; null when it rejected neither)."""
        count = 0
        examples: list[dict[str, Any]] = []
        for (level, seed), actions in sorted(winners.items()):
            distinct: list[str] = []
            for action in actions:
                if not any(self.one_answer(action, d) for d in distinct):
                    distinct.append(action)
            if len(distinct) < 2:
                continue
            count += 1
            if len(examples) < limit:
                a, b = distinct[:2]
                examples.append({"level": level, "seed": seed, "actions": [a, b], "differ": self.difference(a, b)})
        return count, examples


__all__ = ["BLANK", "FIELDS", "OBS_KEPT", "Instance", "Outcomes", "step_difference", "step_outcome"]
