"""Horizon schedules: fixed, stepwise (resume-safe), adaptive."""

from __future__ import annotations

import json

import pytest
from gymverse.curriculum import AdaptiveHorizon, FixedHorizon, StepwiseHorizon, horizon_from_state


def test_fixed() -> None:
    h = FixedHorizon(7)
    assert [h.horizon(), h.update(0.3), h.update()] == [7, 7, 7]
    assert h.cap(5) == 5
    assert h.cap(50) == 7


def test_stepwise_golden() -> None:
    h = StepwiseHorizon([10, 20, 30], interval=3)
    caps = [h.horizon()] + [h.update() for _ in range(10)]
    assert caps == [10, 10, 10, 20, 20, 20, 30, 30, 30, 30, 30]
    assert [h.stage_at(s) for s in (0, 2, 3, 5, 6, 1000)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("resume_at", [1, 9, 10, 11, 20, 25])
def test_stepwise_resume_lands_in_the_same_stage(resume_at: int) -> None:
    # AgentGym-RL skipped a stage when resumed at a multiple of K; here the stage is a function of the step
    ref = StepwiseHorizon([10, 20, 30], interval=10)
    uninterrupted = [ref.horizon()] + [ref.update() for _ in range(34)]
    first = StepwiseHorizon([10, 20, 30], interval=10)
    caps = [first.horizon()] + [first.update() for _ in range(resume_at)]
    resumed = horizon_from_state(json.loads(json.dumps(first.state_dict())))
    assert resumed.horizon() == uninterrupted[resume_at]
    caps += [resumed.update() for _ in range(34 - resume_at)]
    assert caps == uninterrupted
    fresh = StepwiseHorizon([10, 20, 30], interval=10, step=resume_at)  # resume from a bare global step
    assert fresh.horizon() == uninterrupted[resume_at]


def test_adaptive_golden() -> None:
    h = AdaptiveHorizon(initial=4, maximum=10, increment=3, threshold=0.5, patience=2)
    caps = [h.update(r) for r in [0.6, 0.4, 0.6, 0.7, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0]]
    assert caps == [4, 4, 4, 7, 7, 10, 10, 10, 10, 10]
    with pytest.raises(ValueError, match="success rate"):
        h.update(None)


def test_adaptive_round_trip_100_plus_100() -> None:
    rates = [((i * 37) % 100) / 100 for i in range(200)]
    full = AdaptiveHorizon(initial=2, maximum=200, increment=1, threshold=0.6, patience=2)
    a = [full.update(r) for r in rates]
    first = AdaptiveHorizon(initial=2, maximum=200, increment=1, threshold=0.6, patience=2)
    b = [first.update(r) for r in rates[:100]]
    resumed = horizon_from_state(json.loads(json.dumps(first.state_dict())))
    b += [resumed.update(r) for r in rates[100:]]
    assert a == b
    assert a[-1] > a[99] > 2


def test_bad_config_and_state() -> None:
    with pytest.raises(ValueError, match="rounds"):
        StepwiseHorizon([])
    with pytest.raises(ValueError, match="interval"):
        StepwiseHorizon([5], interval=0)
    with pytest.raises(ValueError, match="initial"):
        AdaptiveHorizon(initial=10, maximum=5)
    with pytest.raises(ValueError, match="unknown horizon"):
        horizon_from_state({"kind": "nope"})
    with pytest.raises(ValueError, match="'fixed' schedule"):
        StepwiseHorizon().load_state_dict(FixedHorizon(3).state_dict())
