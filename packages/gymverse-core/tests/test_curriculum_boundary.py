"""BoundarySelector (GenEnv-style) and EnvMixer."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
import pytest
from gymverse.curriculum import BoundarySelector, EnvMixer, rank_trim_indices, trim_count


def test_weights_golden() -> None:
    b = BoundarySelector(alpha=0.5, sharpness=4.0, decay=1.0)
    b.update({"easy": [True] * 4, "mid": [True, False], "hard": (0, 3)})
    assert [b.success(t) for t in ("easy", "mid", "hard", "new")] == [1.0, 0.5, 0.0, 0.5]
    assert b.weights(["easy", "mid", "hard", "new"]) == pytest.approx([math.exp(-1), 1.0, math.exp(-1), 1.0])
    assert BoundarySelector(sharpness=4.0, floor=0.5).weight_of(1.0) == pytest.approx(0.5 + 0.5 * math.exp(-1))
    assert b.keep(["easy", "mid", "hard"], band=0.25) == ["mid"]


def test_decay_weights_recent_results() -> None:
    b = BoundarySelector(decay=0.5)
    b.update({"t": [False] * 4})
    b.update({"t": [True] * 4})
    # succ = 0 * 0.5 + 4 = 4; att = 4 * 0.5 + 4 = 6
    assert b.success("t") == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    ("n", "k", "keep"), [(0, 0.5, 0), (1, 0.1, 1), (3, 0.2, 1), (4, 0.5, 2), (5, 0.5, 3), (10, 0.25, 3), (7, 1.0, 7)]
)
def test_trim_count_never_empties_a_batch(n: int, k: float, keep: int) -> None:
    # GenEnv's int(N * k) gives 0 for N * k < 1 and would drop the whole batch
    assert trim_count(n, k) == keep


def test_rank_trim_keeps_closest_to_alpha_in_input_order() -> None:
    s = [0.9, 0.5, 0.0, 0.6, 0.4, 1.0]
    assert rank_trim_indices(s, 0.5) == [1, 3, 4]
    assert rank_trim_indices([0.25, 0.75], 0.5) == [0]  # tie -> earlier index
    b = BoundarySelector(decay=1.0)
    b.update({"a": (9, 10), "b": (5, 10), "c": (0, 10)})
    assert b.rank_trim(["a", "b", "c"], 0.1) == ["b"]
    with pytest.raises(ValueError, match="filtering_k"):
        trim_count(5, 0.0)


def test_boundary_round_trip_100_plus_100() -> None:
    rng = np.random.default_rng(0)
    batches: list[dict[Hashable, Sequence[bool] | tuple[float, float]]] = [
        {t: (rng.random(4) < p).tolist() for t, p in (("a", 0.2), ("b", 0.5), (3, 0.9))} for _ in range(200)
    ]
    full = BoundarySelector(decay=0.95)
    for x in batches:
        full.update(x)
    first = BoundarySelector(decay=0.95)
    for x in batches[:100]:
        first.update(x)
    resumed = BoundarySelector()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for x in batches[100:]:
        resumed.update(x)
    assert resumed.state_dict() == full.state_dict()
    assert resumed.success(3) == full.success(3) > 0.7  # int task keys survive JSON


def test_bad_boundary_input() -> None:
    with pytest.raises(ValueError, match="alpha"):
        BoundarySelector(alpha=2.0)
    with pytest.raises(ValueError, match="successes <= attempts"):
        BoundarySelector().update({"t": (3, 2)})


# ---------------------------------------------------------------- EnvMixer
def test_round_robin_golden_across_calls() -> None:
    m = EnvMixer(["a", "b", "c"])
    assert m.sample(4) == ["a", "b", "c", "a"]
    assert m.sample(2) == ["b", "c"]
    assert m.sample(0) == []


def test_weighted_is_seeded_and_follows_weights() -> None:
    a = EnvMixer(["x", "y"], "weighted", weights={"x": 3.0, "y": 1.0}, seed=5)
    b = EnvMixer(["x", "y"], "weighted", weights=[3.0, 1.0], seed=5)
    draws = a.sample(4000)
    assert draws == b.sample(4000)
    assert 0.72 < Counter(draws)["x"] / 4000 < 0.78
    assert EnvMixer(["x", "y"], "weighted", weights=[0.0, 1.0]).sample(50) == ["y"] * 50


def test_boundary_mode_prefers_envs_near_alpha() -> None:
    sel = BoundarySelector(sharpness=20.0, decay=1.0)
    sel.update({"solved": (10, 10), "boundary": (5, 10), "hopeless": (0, 10)})
    m = EnvMixer(["solved", "boundary", "hopeless"], "boundary", boundary=sel, seed=1)
    counts = Counter(m.sample(3000))
    assert counts["boundary"] > 10 * max(counts["solved"], counts["hopeless"], 1)
    sel.update({"solved": (490, 1000)})  # now near alpha; weights are re-read on every call
    assert Counter(m.sample(3000))["solved"] > 500


@pytest.mark.parametrize("mode", ["round_robin", "weighted"])
def test_mixer_round_trip_100_plus_100(mode: str) -> None:
    kw = {"weights": [1.0, 2.0, 3.0]} if mode == "weighted" else {}
    full = EnvMixer(["a", "b", "c"], mode, seed=3, **kw)  # type: ignore[arg-type]
    ref = [full.sample(3) for _ in range(200)]
    first = EnvMixer(["a", "b", "c"], mode, seed=3, **kw)  # type: ignore[arg-type]
    got = [first.sample(3) for _ in range(100)]
    resumed = EnvMixer(["q"])
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    got += [resumed.sample(3) for _ in range(100)]
    assert got == ref


def test_bad_mixer_config() -> None:
    with pytest.raises(ValueError, match="unique"):
        EnvMixer(["a", "a"])
    with pytest.raises(ValueError, match="needs weights"):
        EnvMixer(["a"], "weighted")
    with pytest.raises(ValueError, match="BoundarySelector"):
        EnvMixer(["a"], "boundary")
    with pytest.raises(ValueError, match="non-negative"):
        EnvMixer(["a", "b"], "weighted", weights=[1.0, -1.0])
