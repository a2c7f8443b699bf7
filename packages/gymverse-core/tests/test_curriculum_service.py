"""`CurriculumState` and its services: counting episodes once, validation level, checkpoints, the detached actor."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from gymverse.curriculum import (
    BoundarySelector,
    ComplexityController,
    CurriculumState,
    EnvMixer,
    EpisodeOutcome,
    LocalCurriculum,
    StepwiseHorizon,
)
from gymverse.trajectory import Trajectory

CONFIG: dict[str, Any] = {
    "controller": {"promote_patience": 2, "demote_patience": 2},
    "horizon": {"kind": "stepwise", "rounds": [2, 4, 8], "interval": 2},
    "boundary": {"alpha": 0.5, "decay": 1.0},
    "mixer": {"env_ids": ["a:X", "b:Y"], "mode": "boundary", "seed": 3},
    "eval_level": 2,
    "eval_max_turns": 6,
}


def outcomes(env_id: str, flags: list[bool], tag: str = "") -> list[EpisodeOutcome]:
    return [EpisodeOutcome(f"{env_id}-{tag}{i}", env_id, f) for i, f in enumerate(flags)]


def test_each_episode_counts_once_and_errors_are_left_out() -> None:
    st = CurriculumState.from_config(CONFIG)
    batch = outcomes("a:X", [True] * 4, "s1")
    padded = batch + batch[:2]  # a framework padding its batch repeats rows: same episodes
    assert st.record(padded) == 4
    assert st.record([EpisodeOutcome("crash", "a:X", False, error=True)]) == 0
    traj = Trajectory("b:Y", seed=1, complexity=1, success=False, episode_id="t1")
    assert st.record([traj, traj]) == 1
    report = st.end_step()
    assert report.success == {"a:X": 1.0, "b:Y": 0.0} and report.episodes == 5
    assert st.pending() == 0
    st.record(outcomes("a:X", [True] * 3, "s2"))
    report = st.end_step()
    assert [(c["env_id"], c["new_level"]) for c in report.changes] == [("a:X", 2)]
    assert report.horizon == 4 and st.episode_config("a:X").max_turns == 4
    with pytest.raises(ValueError, match="episode_id"):
        st.record([Trajectory("a:X", seed=None, complexity=1)])


def test_validation_config_is_fixed_while_training_levels_move() -> None:
    st = CurriculumState.from_config(CONFIG)
    for step in range(6):
        st.record(outcomes("a:X", [True] * 4, f"s{step}"))
        st.end_step()
    train = st.episode_config("a:X")
    assert train.complexity == 4 and train.max_turns == 8
    assert st.episode_config("a:X", validation=True) == st.episode_config("b:Y", validation=True)
    val = st.episode_config("a:X", validation=True)
    assert (val.complexity, val.max_turns) == (2, 6)
    default_eval = CurriculumState(ComplexityController(initial_level=3))
    default_eval.record(outcomes("a:X", [True] * 9))
    assert default_eval.episode_config("a:X", validation=True).complexity == 3  # the initial level, not the current


def test_checkpoint_round_trip_keeps_running_config_unless_told() -> None:
    st = CurriculumState.from_config(CONFIG)
    for step in range(3):
        st.record(outcomes("a:X", [True] * 4, f"s{step}") + outcomes("b:Y", [True, False], f"s{step}"))
        st.end_step()
    st.sample_envs(5)
    saved = json.loads(json.dumps(st.state_dict()))  # checkpoints are JSON

    same = CurriculumState.from_config(CONFIG)
    same.load_state_dict(saved)
    assert same.state_dict() == st.state_dict()
    assert same.sample_envs(7) == st.sample_envs(7)  # mixer RNG and boundary statistics resumed

    changed = CurriculumState.from_config({**CONFIG, "controller": {"promote_patience": 5, "promote_at": 0.9}})
    changed.load_state_dict(saved)
    assert changed.controller.promote_patience == 5 and changed.controller.promote_at == 0.9  # config kept
    assert changed.levels() == st.levels() and changed.horizon is not None and changed.horizon.step == 3
    told = CurriculumState.from_config({**CONFIG, "controller": {"promote_patience": 5}})
    told.load_state_dict(saved, load_config=True)
    assert told.controller.promote_patience == 2 and json.loads(json.dumps(told.state_dict())) == saved
    with pytest.raises(ValueError, match="version"):
        same.load_state_dict({**saved, "version": 99})


def local_service() -> LocalCurriculum:
    return LocalCurriculum(
        CurriculumState(
            ComplexityController(promote_patience=1),
            StepwiseHorizon([3, 5], interval=1),
            boundary=BoundarySelector(),
            mixer=EnvMixer(["a:X"], mode="round_robin"),
        )
    )


def test_local_service_save_load_and_async_record(tmp_path: Path) -> None:
    svc = local_service()

    async def workers() -> list[int]:  # rollout coroutines report as their episodes finish
        return list(await asyncio.gather(*(svc.arecord(outcomes("a:X", [True], f"w{i}")) for i in range(8))))

    assert asyncio.run(workers()) == [1] * 8
    assert asyncio.run(svc.aepisode_config("a:X")).max_turns == 3
    report = svc.end_step()
    assert report.episodes == 8 and report.levels == {"a:X": 2}
    path = svc.save(str(tmp_path / "ckpt" / "curriculum.json"))
    fresh = local_service()
    assert not fresh.load(str(tmp_path / "missing.json"))
    assert fresh.load(path) and fresh.state_dict() == svc.state_dict()
    assert fresh.episode_config("a:X").complexity == 2 and fresh.episode_config("a:X").max_turns == 5
    assert not list((tmp_path / "ckpt").glob("*.tmp"))


def test_bad_config_names_the_problem() -> None:
    with pytest.raises(ValueError, match="evolutoin"):
        CurriculumState.from_config({"evolutoin": True})
    with pytest.raises(ValueError, match="kind"):
        CurriculumState.from_config({"horizon": {"rounds": [1]}})


# ---------------------------------------------------------------------------------------------- detached actor
DRIVER_ONE = """
import gc, json, sys, ray
from gymverse.curriculum import EpisodeOutcome, start_ray_curriculum
ray.init(address=sys.argv[1], log_to_driver=False)
cfg = json.loads(sys.argv[3])
svc = start_ray_curriculum(cfg, name=sys.argv[2])
for step in range(2):
    svc.record([EpisodeOutcome(f"e{step}-{i}", "a:X", True) for i in range(4)])
    svc.end_step()
# the bug this guards against: a launcher that keeps no handle. A plain named actor would die with its owner.
ray.remote(num_cpus=0)(dict).options(name=sys.argv[2] + "-plain", namespace="gymverse").remote()
del svc
gc.collect()
print(json.dumps({"ok": True}))
"""

DRIVER_TWO = """
import json, sys, ray
from gymverse.curriculum import EpisodeOutcome, connect_ray_curriculum
ray.init(address=sys.argv[1], log_to_driver=False)
svc = connect_ray_curriculum(sys.argv[2])
levels = svc.levels()
config = svc.episode_config("a:X")
try:
    ray.get_actor(sys.argv[2] + "-plain", namespace="gymverse")
    plain_alive = True
except ValueError:
    plain_alive = False
svc.record([EpisodeOutcome("late", "a:X", False)])
updates = svc.state_dict()["controller"]["num_updates"]
print(json.dumps({"levels": levels, "max_turns": config.max_turns, "pending": updates, "plain_alive": plain_alive}))
svc.stop()
"""


def _driver(code: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=240, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow
def test_detached_actor_outlives_the_driver_that_started_it(ray_session: Any) -> None:
    ray = ray_session
    address = ray.get_runtime_context().gcs_address
    name = f"gymverse-test-{uuid.uuid4().hex[:8]}"
    cfg = {"controller": {"promote_patience": 2}, "horizon": {"kind": "stepwise", "rounds": [3, 7], "interval": 2}}
    assert _driver(DRIVER_ONE, address, name, json.dumps(cfg)) == {"ok": True}
    # driver one has exited and dropped every handle; a second driver reaches the same state by name
    got = _driver(DRIVER_TWO, address, name)
    assert got == {"levels": {"a:X": 2}, "max_turns": 7, "pending": 2, "plain_alive": False}
    with pytest.raises(ValueError):  # driver two stopped it: detached actors end only when told
        ray.get_actor(name, namespace="gymverse")


RUN_DRIVER = """
import json, os, sys, time, ray
from gymverse.curriculum import EpisodeOutcome, run_scoped_name, start_ray_curriculum
ray.init(address=sys.argv[1], log_to_driver=False)
flags, ready, go = sys.argv[2] == "win", sys.argv[3], sys.argv[4]
name = run_scoped_name("gymverse_curriculum")
svc = start_ray_curriculum({"controller": {"promote_patience": 1, "demote_patience": 1}}, name=name)  # fresh
svc.record([EpisodeOutcome(f"{sys.argv[2]}-{i}", "a:X", flags) for i in range(4)])
svc.end_step()
open(ready, "w").close()
deadline = time.monotonic() + 120
while go != "-" and not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({"name": name, "levels": svc.levels()}))
svc.stop()
"""


@pytest.mark.slow
def test_two_runs_on_one_cluster_keep_separate_curricula(ray_session: Any, tmp_path: Path) -> None:
    # Run A promotes its env and keeps running; run B starts on the same cluster (a fresh actor, as a launcher
    # does). With one fixed actor name B would kill A's actor; with run-scoped names each keeps its own levels.
    address = ray_session.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    ready, go = tmp_path / "a-ready", tmp_path / "go"
    a = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(RUN_DRIVER), address, "win", str(ready), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for _ in range(1200):
            if ready.exists() or a.poll() is not None:
                break
            asyncio.run(asyncio.sleep(0.1))
        assert ready.exists(), a.stderr.read() if a.stderr else ""
        b = _driver(RUN_DRIVER, address, "lose", str(tmp_path / "b-ready"), "-")
        go.touch()
        out, err = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 0, err[-3000:]
    got_a = json.loads(out.strip().splitlines()[-1])
    assert got_a["name"] != b["name"] and got_a["name"].startswith("gymverse_curriculum-")
    assert got_a["levels"] == {"a:X": 2}  # A's promotion survived B's start
    assert b["levels"] == {"a:X": 1}  # B's failures demoted nothing below 1 and never touched A


def test_checkpoint_files_are_per_tag_and_resume_is_strict(tmp_path: Path) -> None:
    from gymverse.curriculum import CHECKPOINT_FILE, load_checkpoint, save_checkpoint

    svc = LocalCurriculum(CurriculumState(ComplexityController(promote_patience=1)))
    for step in (1, 2):
        svc.record(outcomes("a:X", [True] * 4, tag=f"s{step}"))
        svc.end_step()
        save_checkpoint(svc, str(tmp_path / f"global_step_{step}"), global_step=step)
    assert svc.levels() == {"a:X": 3}
    assert not list(tmp_path.rglob("*.tmp"))  # written atomically
    older = LocalCurriculum(CurriculumState(ComplexityController(promote_patience=1)))
    load_checkpoint(older, str(tmp_path / "global_step_1"))
    assert older.levels() == {"a:X": 2}  # the tag resumed, not the newest
    (tmp_path / "global_step_3").mkdir()
    with pytest.raises(FileNotFoundError, match=f"global_step_3 has no {CHECKPOINT_FILE}"):
        load_checkpoint(older, str(tmp_path / "global_step_3"))
    assert older.levels() == {"a:X": 2}  # never silently reset


def test_void_episodes_are_neither_success_nor_failure() -> None:
    state = CurriculumState(ComplexityController(promote_patience=1, demote_patience=1))
    for i, reason in enumerate(["env_error", "reset_error", "generation_aborted", "generation_error"]):
        t = Trajectory("a:X", seed=i, complexity=1, stop_reason=reason, episode_id=f"v{i}")
        assert EpisodeOutcome.of(t).error
        state.record([t])
    cut = Trajectory("a:X", seed=9, complexity=1, stop_reason="length", episode_id="cut")
    assert not EpisodeOutcome.of(cut).error  # a length cut is the policy's failure
    state.record([cut])
    report = state.end_step()
    assert report.episodes == 1 and report.success == {"a:X": 0.0}
