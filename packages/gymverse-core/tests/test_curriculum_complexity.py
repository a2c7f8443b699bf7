"""ComplexityController: the PERPO evolution rule, events, success source, and state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymverse.curriculum import ComplexityController, LevelChange, success_by_env
from gymverse.trajectory import Trajectory, Turn


def run(ctrl: ComplexityController, rates: list[float], env: str = "e") -> list[int]:
    levels = []
    for r in rates:
        ctrl.update({env: r})
        levels.append(ctrl.level(env))
    return levels


def test_reference_rule_golden() -> None:
    c = ComplexityController()
    # three highs -> 2; streak restarted, so two more highs do nothing; a mid rate breaks it; three lows -> 1
    assert run(c, [0.8, 0.9, 1.0, 0.9, 0.85, 0.5, 0.9, 0.1, 0.0, 0.05]) == [1, 1, 2, 2, 2, 2, 2, 2, 2, 1]


def test_streak_break_and_opposite_streak_reset_counters() -> None:
    c = ComplexityController()
    assert run(c, [0.9, 0.9, 0.0, 0.9, 0.9, 0.5, 0.9, 0.9, 0.9]) == [1] * 8 + [2]


def test_clamps_without_events_and_counters_restart_at_the_bounds() -> None:
    c = ComplexityController(initial_level=10)
    events = [c.update({"e": 1.0}) for _ in range(6)]
    assert c.level("e") == 10
    assert not any(events)
    c = ComplexityController()
    assert run(c, [0.0] * 4) == [1, 1, 1, 1]
    # after hitting the floor at update 3 the streak restarted: the 4th low does not count as the 4th in a row
    assert c.state_dict()["envs"]["e"]["demote_streak"] == 1


def test_events_report_the_change() -> None:
    c = ComplexityController()
    c.update({"a": 1.0, "b": 0.5})
    c.update({"a": 1.0})
    ev = c.update({"a": [True, True, True, True, False], "b": 0.5})
    assert ev == [LevelChange("a", 1, 2, 0.8, 3, "promote")]
    assert c.levels() == {"a": 2, "b": 1}


def test_thresholds_are_configurable() -> None:
    c = ComplexityController(promote_at=0.5, demote_at=0.2, promote_patience=1, demote_patience=2, max_level=3)
    assert run(c, [0.5, 0.5, 0.5, 0.5, 0.2, 0.2, 0.2]) == [2, 3, 3, 3, 3, 2, 2]


def test_absent_envs_and_empty_batches_leave_state_untouched() -> None:
    c = ComplexityController()
    c.update({"a": 1.0})
    c.update({"a": 1.0})
    c.update({"b": 0.0, "a": []})
    c.update({"a": 1.0})
    assert c.level("a") == 2


def test_success_comes_from_success_flag_never_from_reward() -> None:
    # reward 1.0 on every turn but info["success"] False: must count as failure
    fake = [Trajectory("e", i, 1, [Turn("o", "a", 1.0)], success=False) for i in range(4)]
    real = [Trajectory("e", i, 1, [Turn("o", "a", 0.0)], success=True) for i in range(4)]
    assert success_by_env(fake + real[:1]) == {"e": [False] * 4 + [True]}
    c = ComplexityController()
    for _ in range(3):
        c.update_from_trajectories(fake)
    assert c.level("e") == 1
    for _ in range(3):
        c.update_from_trajectories(real)
    assert c.level("e") == 2


@pytest.mark.parametrize(
    ("kwargs", "update", "match"),
    [
        ({"promote_at": 0.1, "demote_at": 0.5}, None, "demote_at < promote_at"),
        ({"initial_level": 11}, None, "initial_level"),
        ({"promote_patience": 0}, None, "patience"),
        ({}, {"e": 1.5}, r"\[0, 1\]"),
        ({}, {"e": True}, "bare bool"),
        ({}, {"e": [1, 0]}, "bools"),
    ],
)
def test_bad_config_and_input(kwargs: dict, update: dict | None, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        ComplexityController(**kwargs).update(update or {})


def test_state_round_trip_100_plus_100_equals_200() -> None:
    rng = np.random.default_rng(7)
    envs = ["a", "b", "c"]
    batches = [{e: (rng.random(8) < rng.choice([0.05, 0.5, 0.95])).tolist() for e in envs} for _ in range(200)]
    full = ComplexityController(promote_patience=2)
    full_events = [full.update(b) for b in batches]
    first = ComplexityController(promote_patience=2)
    events = [first.update(b) for b in batches[:100]]
    resumed = ComplexityController()  # different config: load must restore it
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    events += [resumed.update(b) for b in batches[100:]]
    assert resumed.state_dict() == full.state_dict()
    assert events == full_events
    assert any(events[100:])
    with pytest.raises(ValueError, match="version"):
        resumed.load_state_dict({"version": 99})
