"""Complexity: the reference level -> value mapping, tables, variance, level validation, pending levels."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from gymverse.complexity import LEVELS, ComplexitySpec, check_level, interpolate
from gymverse.core import Env, EnvMetadata, StepResult
from hypothesis import given
from hypothesis import strategies as st


def test_reference_mapping_golden_values() -> None:
    spec = ComplexitySpec({"upper": (10, 5000), "slack": (6, 0), "p": (0.5, 0.05), "k": (1, 4)})
    table = spec.table()
    assert [table[lvl]["upper"] for lvl in LEVELS] == [10, 564, 1119, 1673, 2228, 2782, 3337, 3891, 4446, 5000]
    # reversed range: fewer spare turns at higher levels, rounded half-up after interpolation
    assert [table[lvl]["slack"] for lvl in LEVELS] == [6, 5, 5, 4, 3, 3, 2, 1, 1, 0]
    assert [table[lvl]["k"] for lvl in LEVELS] == [1, 1, 2, 2, 2, 3, 3, 3, 4, 4]
    assert table[1]["p"] == 0.5
    assert table[10]["p"] == pytest.approx(0.05)
    assert table[4]["p"] == pytest.approx(0.35)
    assert isinstance(table[4]["p"], float)
    assert isinstance(table[4]["upper"], int)


def test_int_mapping_is_monotone_and_within_range() -> None:
    for v1, v10 in [(0, 1), (3, 17), (100, 2), (-5, 5), (7, 7)]:
        values = [interpolate(v1, v10, lvl) for lvl in LEVELS]
        assert values[0] == v1
        assert values[-1] == v10
        assert all(isinstance(v, int) for v in values)
        step = 1 if v10 >= v1 else -1
        assert all((b - a) * step >= 0 for a, b in itertools.pairwise(values))


def test_mixed_int_float_range_gives_floats() -> None:
    assert interpolate(1, 2.0, 10) == 2.0
    assert isinstance(interpolate(1, 2.0, 5), float)


def test_level_tables() -> None:
    words = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    spec = ComplexitySpec({"word": words, "n": (2, 20)})
    assert [spec.value("word", lvl) for lvl in LEVELS] == words
    assert spec.bounds("n") == (2, 20)
    with pytest.raises(ValueError, match="needs 10 values, got 3"):
        ComplexitySpec({"word": ["a", "b", "c"]})
    with pytest.raises(ValueError, match=r"expected \(value_at_1, value_at_10\)"):
        ComplexitySpec({"n": (1, 2, 3)})
    with pytest.raises(ValueError, match="got str"):
        ComplexitySpec({"n": "hard"})
    with pytest.raises(ValueError, match="unknown params"):
        ComplexitySpec({"n": (1, 2)}, {"m": 1})
    with pytest.raises(ValueError, match="non-negative number, got -1"):
        ComplexitySpec({"n": (1, 5)}, {"n": -1})
    with pytest.raises(ValueError, match="needs numeric values"):
        ComplexitySpec({"word": words}, {"word": 1})


@given(st.integers(0, 2**32 - 1), st.sampled_from(LEVELS))
def test_variance_stays_in_bounds_and_is_deterministic_per_rng(seed: int, level: int) -> None:
    spec = ComplexitySpec(
        {"n": (3, 30), "p": (0.9, 0.1), "t": [1, 1, 2, 3, 5, 8, 13, 21, 34, 55]}, {"n": 4, "p": 0.3, "t": 5}
    )
    a = spec.resolve(level, np.random.default_rng(seed))
    b = spec.resolve(level, np.random.default_rng(seed))
    assert a == b
    assert 3 <= a["n"] <= 30
    assert isinstance(a["n"], int)
    assert abs(a["n"] - spec.value("n", level)) <= 4
    assert 0.1 <= a["p"] <= 0.9
    assert abs(a["p"] - spec.value("p", level)) <= 0.3 + 1e-12
    assert 1 <= a["t"] <= 55
    assert spec.resolve(level) == {n: spec.value(n, level) for n in spec.params}  # no rng: no variance


def test_variance_actually_varies() -> None:
    spec = ComplexitySpec({"n": (3, 30)}, {"n": 4})
    rng = np.random.default_rng(0)
    assert len({spec.resolve(5, rng)["n"] for _ in range(60)}) > 3


@pytest.mark.parametrize("bad", [0, 11, -1, 2.5, True, False, "3", None, 3.0])
def test_invalid_levels_name_the_range(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"1\.\.10") as err:
        check_level(bad)
    assert repr(bad) in str(err.value) or str(bad) in str(err.value)
    with pytest.raises(ValueError, match=r"1\.\.10"):
        interpolate(0, 9, bad)


def test_numpy_integer_levels_are_accepted() -> None:
    assert check_level(np.int64(7)) == 7
    assert type(check_level(np.int64(7))) is int


class Sized(Env):
    metadata = EnvMetadata(name="Sized", family="test", domain="other", description="reports its size")
    complexity_params = {"size": (1, 10)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        return f"size {self.params['size']}", {}

    def _step(self, action: str) -> StepResult:
        return StepResult(f"size {self.params['size']}", 0.0, False, False, {})

    def solve(self) -> str:
        return "noop"


def test_set_complexity_takes_effect_only_at_next_reset() -> None:
    env = Sized(complexity=2, seed=0)
    obs, info = env.reset()
    assert obs == "size 2"
    assert info["complexity"] == 2
    env.set_complexity(7)
    assert env.complexity == 7  # reports the pending level
    res = env.step("x")
    assert res.observation == "size 2"
    assert res.info["complexity"] == 2
    assert env.params["size"] == 2
    obs, info = env.reset()
    assert obs == "size 7"
    assert info["complexity"] == 7
    with pytest.raises(ValueError, match=r"1\.\.10"):
        env.set_complexity(0)
    assert env.complexity == 7
    with pytest.raises(ValueError, match=r"1\.\.10"):
        Sized(complexity=11)
