"""Declarative complexity: map a level in 1..10 to concrete parameter values.

An env declares ``complexity_params = {name: (value_at_level_1, value_at_level_10)}``; ranges may be reversed
(e.g. fewer hints at higher levels), and a param may instead be an explicit table of ten per-level values. The
library, never the env, turns a level into values, with the reference mapping::

    norm  = (level - 1) / 9
    value = v1 + norm * (v10 - v1)          # ints: rounded, then clamped to [min(v1, v10), max(v1, v10)]

Optional ``param_variance = {name: v}`` adds a uniform draw in ``[-v, +v]`` (integers for int params) from the
env's own RNG, clamped to the declared range, so instances at one level differ in more than layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MIN_LEVEL = 1
MAX_LEVEL = 10
LEVELS: tuple[int, ...] = tuple(range(MIN_LEVEL, MAX_LEVEL + 1))


def check_level(level: object) -> int:
    """Return `level` as an int, or raise ValueError naming the allowed range."""
    if isinstance(level, bool) or not isinstance(level, int | np.integer):
        raise ValueError(f"complexity must be an integer in {MIN_LEVEL}..{MAX_LEVEL}, got {level!r}")
    if not MIN_LEVEL <= int(level) <= MAX_LEVEL:
        raise ValueError(f"complexity must be in {MIN_LEVEL}..{MAX_LEVEL}, got {level}")
    return int(level)


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def interpolate(v1: float, v10: float, level: int) -> float | int:
    """The reference mapping of a (level-1, level-10) range to the value at `level`."""
    level = check_level(level)
    norm = (level - MIN_LEVEL) / (MAX_LEVEL - MIN_LEVEL)
    value = v1 + norm * (v10 - v1)
    if _is_int(v1) and _is_int(v10):
        lo, hi = min(int(v1), int(v10)), max(int(v1), int(v10))
        # round-half-up keeps the mapping monotone (Python's round() is banker's rounding).
        return int(min(max(int(np.floor(value + 0.5)), lo), hi))
    return float(value)


@dataclass(frozen=True)
class ComplexitySpec:
    """Validated complexity declaration of one env class."""

    params: Mapping[str, Any] = field(default_factory=dict)
    variance: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, decl in self.params.items():
            if isinstance(decl, tuple):
                if len(decl) != 2 or not all(isinstance(v, int | float | np.number) for v in decl):
                    raise ValueError(f"complexity param {name!r}: expected (value_at_1, value_at_10), got {decl!r}")
            elif isinstance(decl, list):
                if len(decl) != MAX_LEVEL:
                    raise ValueError(
                        f"complexity param {name!r}: a level table needs {MAX_LEVEL} values, got {len(decl)}"
                    )
            else:
                raise ValueError(
                    f"complexity param {name!r}: expected a (v1, v10) tuple or a list of {MAX_LEVEL} values, "
                    f"got {type(decl).__name__}"
                )
        unknown = set(self.variance) - set(self.params)
        if unknown:
            raise ValueError(f"param_variance names unknown params: {sorted(unknown)}")
        for name, var in self.variance.items():
            # checked here so a bad declaration fails at class use, not as a numpy error inside some reset()
            if isinstance(var, bool) or not isinstance(var, int | float | np.number) or not var >= 0:
                raise ValueError(f"param_variance[{name!r}] must be a non-negative number, got {var!r}")
            if var and not all(isinstance(v, int | float | np.number) for v in self.params[name]):
                raise ValueError(f"param_variance[{name!r}]: variance needs numeric values, the table is not")

    def value(self, name: str, level: int) -> Any:
        """Deterministic value of param `name` at `level` (no variance)."""
        decl = self.params[name]
        if isinstance(decl, list):
            return decl[check_level(level) - 1]
        return interpolate(decl[0], decl[1], level)

    def bounds(self, name: str) -> tuple[Any, Any]:
        """(min, max) over all levels of a numeric param."""
        decl = self.params[name]
        values: Sequence[Any] = decl
        return min(values), max(values)

    def resolve(self, level: int, rng: np.random.Generator | None = None) -> dict[str, Any]:
        """All param values at `level`, with variance drawn from `rng` when given."""
        out: dict[str, Any] = {}
        for name in self.params:
            v = self.value(name, level)
            var = self.variance.get(name, 0)
            if rng is not None and var:
                lo, hi = self.bounds(name)
                if _is_int(v):
                    v = int(np.clip(v + int(rng.integers(-int(var), int(var) + 1)), lo, hi))
                else:
                    v = float(np.clip(v + float(rng.uniform(-var, var)), lo, hi))
            out[name] = v
        return out

    def table(self) -> dict[int, dict[str, Any]]:
        """The deterministic values at every level, for docs and the checker."""
        return {lvl: {n: self.value(n, lvl) for n in self.params} for lvl in LEVELS}
