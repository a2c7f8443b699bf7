"""`Env` base behaviour: episode guards, truncation, format errors, `StepResult`, state, trajectories on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymverse.actions import parse_boxed
from gymverse.core import FORMAT_PENALTY, Env, EnvMetadata, StepResult, run_oracle
from gymverse.trajectory import Trajectory, Turn, read_jsonl, write_jsonl


class Countdown(Env):
    """Reach zero from a random start by submitting \\boxed{n} with n = the current value."""

    metadata = EnvMetadata(name="Countdown", family="test", domain="other", description="count down", max_turns=4)
    complexity_params = {"start": (2, 20)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.value = int(self.rng.integers(1, int(self.params["start"]) + 1))
        return f"value {self.value}", {"start": self.value}

    def _step(self, action: str) -> StepResult:
        n = int(parse_boxed(action, what="the current value"))
        if n != self.value:
            return StepResult(f"wrong, value {self.value}", 0.0, False, False, {})
        self.value -= 1
        if self.value == 0:
            return StepResult("done", 1.0, True, False, {"success": True})
        return StepResult(f"value {self.value}", 0.0, False, False, {})

    def solve(self) -> str:
        return rf"\boxed{{{self.value}}}"


def test_step_before_reset_and_after_done_raise_clear_errors() -> None:
    env = Countdown(seed=1)
    with pytest.raises(RuntimeError, match=r"Countdown\.step\(\) called before reset\(\)"):
        env.step(r"\boxed{1}")
    env.reset(seed=0)
    env.value = 1
    assert env.step(r"\boxed{1}").terminated
    with pytest.raises(RuntimeError, match=r"after the episode ended; call reset\(\)"):
        env.step(r"\boxed{1}")
    env.reset()
    assert not env.done
    assert env.turn == 0


def test_max_turns_truncates_without_success() -> None:
    env = Countdown(seed=3)
    env.reset()
    results = [env.step(r"\boxed{999}") for _ in range(4)]
    assert [r.truncated for r in results] == [False, False, False, True]
    last = results[-1]
    assert not last.terminated
    assert last.info["success"] is False
    assert "Turn limit of 4 reached" in last.observation
    assert env.done
    override = Countdown(seed=3, max_turns=2)
    override.reset()
    override.step(r"\boxed{999}")
    assert override.step(r"\boxed{999}").truncated
    assert override.max_turns == 2


def test_format_error_gives_penalty_observation_and_is_not_terminal() -> None:
    env = Countdown(seed=0)
    env.reset()
    res = env.step("I think it's 3")
    assert res.reward == FORMAT_PENALTY == -0.1
    assert res.info["format_error"] is True
    assert "no \\boxed" in res.info["error_message"]
    assert res.observation.startswith("Invalid action:")
    assert r"\boxed{...}" in res.observation
    assert not res.done
    assert env.turn == 1
    ok = env.step(env.solve())
    assert ok.info["format_error"] is False
    non_str = env.step(12345)  # type: ignore[arg-type]
    assert non_str.info["format_error"] is True


def test_step_result_unpacks_as_five_tuple() -> None:
    env = Countdown(seed=0)
    env.reset()
    res = env.step(env.solve())
    obs, reward, terminated, truncated, info = res
    assert (obs, reward, terminated, truncated, info) == tuple(res)
    assert isinstance(res, tuple)
    assert len(res) == 5
    assert res.done == (terminated or truncated)
    assert isinstance(reward, float)
    assert info["turn"] == 1
    assert info["complexity"] == 1


def test_seeded_transcripts_are_identical_and_seeds_differ() -> None:
    def transcript(seed: int) -> list[tuple[str, float]]:
        env = Countdown(complexity=10)
        obs, _ = env.reset(seed=seed)
        return [(obs, 0.0)] + [(r.observation, r.reward) for r in run_oracle(env, seed=seed)]

    assert transcript(5) == transcript(5)
    assert len({transcript(s)[0][0] for s in range(10)}) > 1


def test_get_state_set_state_and_clone_branch_identically() -> None:
    env = Countdown(complexity=10, seed=0)
    env.reset(seed=11)
    env.step(env.solve())
    snap = env.get_state()
    twin = env.clone()
    a = [env.step(env.sample_random_action()).observation for _ in range(2)]
    b = [twin.step(twin.sample_random_action()).observation for _ in range(2)]
    assert a == b
    env.set_state(snap)
    assert [env.step(env.sample_random_action()).observation for _ in range(2)] == a


def test_oracle_reaches_success_at_every_level() -> None:
    for level in range(1, 11):
        env = Countdown(complexity=level, max_turns=50)
        steps = run_oracle(env, seed=level)
        assert steps[-1].info["success"] is True
        assert steps[-1].terminated


def test_trajectory_jsonl_round_trip(tmp_path: Path) -> None:
    env = Countdown(complexity=6, max_turns=50)
    obs, _ = env.reset(seed=2)
    traj = Trajectory(env_id="test:Countdown", seed=2, complexity=6)
    while not env.done:
        action = env.solve()
        res = env.step(action)
        traj.turns.append(Turn(obs, action, res.reward, {**res.info, "arr": np.arange(3), "x": np.float32(0.5)}))
        obs = res.observation
    traj.success, traj.final_observation = bool(res.info["success"]), obs
    traj.metrics = {"note": "ünïcödé ✓", "score": np.int64(7)}
    other = Trajectory(env_id="test:Other", seed=None, complexity=1, error="boom", truncated=True)
    path = tmp_path / "t.jsonl"
    assert write_jsonl([traj], path) == 1
    assert write_jsonl([other], path, append=True) == 1
    back = list(read_jsonl(path))
    assert len(back) == 2
    got = back[0]
    assert got.env_id == "test:Countdown"
    assert got.success is True
    assert got.complexity == 6
    assert [t.action for t in got.turns] == [t.action for t in traj.turns]
    assert got.turns[0].info["arr"] == [0, 1, 2]
    assert got.turns[0].info["x"] == 0.5
    assert got.metrics == {"note": "ünïcödé ✓", "score": 7}
    assert got.total_reward == traj.total_reward == 1.0
    assert back[1] == other
    assert "ünïcödé" in path.read_text(encoding="utf-8")  # ensure_ascii=False keeps text readable


def test_corrupt_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(Trajectory(env_id="a:b", seed=1, complexity=1).to_dict())
    path.write_text(good + "\n\n" + '{"env_id": "a:b", "bogus": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: not a trajectory record"):
        list(read_jsonl(path))
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        list(read_jsonl(path))
