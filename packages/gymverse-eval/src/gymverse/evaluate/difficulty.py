"""Difficulty: per-level success rates, unbiased pass@k, slope/Spearman of success vs level, buckets, flags.

The *reference policy* of an env is the one whose curve describes its difficulty: a noisy oracle if one was run
(it succeeds often enough at low levels for a trend to show), else the LLM, else random, else the oracle. Bucket:
easy (mean rate >= 0.7), medium (>= 0.3), hard. An env is flagged ``flat_difficulty`` when the reference curve
changes by less than `flat_tolerance` over the measured level range while not stuck at zero (all-zero curves
carry no information and are flagged ``no_signal`` instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gymverse.evaluate.passk import ks_for, least_squares_slope, pass_at_k, spearman
from gymverse.evaluate.schema import LevelResult, PolicyDifficulty

EASY_AT, MEDIUM_AT = 0.7, 0.3


@dataclass(frozen=True)
class DifficultyConfig:
    """Which levels/seeds/k to measure and how to judge the curve."""

    levels: tuple[int, ...] = (1, 3, 5, 7, 10)
    seeds: tuple[int, ...] = tuple(range(16))
    ks: tuple[int, ...] = (1, 5, 10)
    flat_tolerance: float = 0.15
    max_steps: int | None = None
    timeout: float = 300.0

    def __post_init__(self) -> None:
        if not self.levels or not self.seeds:
            raise ValueError("difficulty needs at least one level and one seed")
        bad = [lv for lv in self.levels if not 1 <= lv <= 10]
        if bad:
            raise ValueError(f"levels must be in 1..10, got {bad}")


def level_result(level: int, episodes: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> LevelResult:
    """Aggregate episode dicts (``success``, ``turns``, ``error``) of one level."""
    n = len(episodes)
    if n == 0:
        return LevelResult(level=level, n=0, successes=0, rate=0.0)
    c = sum(1 for e in episodes if e.get("success") is True)
    errors = [str(e["error"]) for e in episodes if e.get("error")]
    return LevelResult(
        level=level,
        n=n,
        successes=c,
        rate=c / n,
        pass_at_k={str(k): pass_at_k(n, c, k) for k in ks_for(n, ks)},
        mean_turns=sum(float(e.get("turns", 0)) for e in episodes) / n,
        errors=len(errors),
        first_error=errors[0] if errors else None,
    )


def policy_difficulty(policy: str, levels: Sequence[LevelResult], error: str | None = None) -> PolicyDifficulty:
    """Per-level results plus slope (least squares) and Spearman rho of success rate vs level."""
    measured = [lv for lv in sorted(levels, key=lambda lv: lv.level) if lv.n > 0]
    if measured and all(lv.errors >= lv.n for lv in measured):
        # every episode raised: a curve of zeros would read as "hard, slope +0.000"; the env has no difficulty
        first = next((lv.first_error for lv in measured if lv.first_error), "unknown error")
        why = f"no difficulty: every episode raised ({first})"
        return PolicyDifficulty(policy=policy, levels=list(measured), error=f"{error}; {why}" if error else why)
    xs = [float(lv.level) for lv in measured]
    ys = [lv.rate for lv in measured]
    total_n = sum(lv.n for lv in measured)
    mean_rate = sum(lv.successes for lv in measured) / total_n if total_n else 0.0
    return PolicyDifficulty(
        policy=policy,
        levels=list(measured),
        slope=least_squares_slope(xs, ys),
        spearman=spearman(xs, ys),
        mean_rate=mean_rate,
        error=error,
    )


def _preference(policy: str) -> int:
    order = ("noisy", "llm", "random", "oracle", "constant")
    base = policy.split(":", 1)[0]
    return order.index(base) if base in order else len(order)


def reference_policy(difficulty: Mapping[str, PolicyDifficulty]) -> str | None:
    """The policy whose curve defines an env's difficulty (see the module docstring)."""
    usable = [
        p for p, d in difficulty.items()
        if d.levels and d.error is None and sum(lv.errors for lv in d.levels) < sum(lv.n for lv in d.levels)
    ]  # fmt: skip
    return min(usable, key=_preference) if usable else None


def bucket(mean_rate: float) -> str:
    """easy / medium / hard from a mean success rate."""
    if mean_rate >= EASY_AT:
        return "easy"
    return "medium" if mean_rate >= MEDIUM_AT else "hard"


def difficulty_flags(pd: PolicyDifficulty, flat_tolerance: float = 0.15) -> list[str]:
    """``flat_difficulty`` / ``no_signal`` / ``easier_when_harder`` for one reference curve."""
    if len(pd.levels) < 2 or pd.slope is None:
        return []
    if all(lv.successes == 0 for lv in pd.levels):
        return ["no_signal"]
    span = pd.levels[-1].level - pd.levels[0].level
    change = pd.slope * span
    flags = []
    if abs(change) < flat_tolerance:
        flags.append("flat_difficulty")
    elif change > flat_tolerance:  # success rising with level: the knob works backwards
        flags.append("easier_when_harder")
    return flags


__all__ = [
    "DifficultyConfig",
    "bucket",
    "difficulty_flags",
    "level_result",
    "policy_difficulty",
    "reference_policy",
]
