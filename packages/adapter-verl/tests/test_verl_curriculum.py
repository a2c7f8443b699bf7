"""Curriculum settings (core's `CurriculumOptions` under verl's config), evolution through the run's curriculum
actor, per-checkpoint curriculum files, and two runs on one Ray cluster."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

GUESS = "game:GuessTheNumber"


def episodes(kit: Any, tokenizer: Any, seeds: list[int], **cfg: Any) -> list[Any]:
    config = kit.make_config(**cfg)
    server = kit.ScriptedServer(tokenizer)

    async def main() -> list[Any]:
        loops = [kit.make_agent_loop(config, server, tokenizer) for _ in seeds]
        params = {"temperature": 1.0, "logprobs": True}
        return list(await asyncio.gather(*(lp.run(dict(params), **kit.row(GUESS, s)) for lp, s in zip(loops, seeds))))

    return asyncio.run(main())


def level(out: Any) -> int:
    return int(out.extra_fields["gymverse"]["level"])


def curriculum_state(**section: Any) -> Any:
    """The core `CurriculumState` a ``gymverse`` config section describes (what the actor runs)."""
    from gymverse.curriculum import CurriculumState
    from gymverse_verl.settings import GymVerseSettings

    return CurriculumState.from_config(GymVerseSettings.from_dict(section).curriculum.to_config())


def outcomes(env_id: str, flags: list[bool], tag: str) -> list[Any]:
    from gymverse.curriculum import EpisodeOutcome

    return [EpisodeOutcome(f"{env_id}-{tag}-{i}", env_id, f) for i, f in enumerate(flags)]


def test_curriculum_state_rules_and_round_trip() -> None:
    from gymverse.curriculum import EpisodeConfig

    section = {"evolve": True, "horizon": "2,4", "horizon_interval": 2}
    st = curriculum_state(**section)
    assert st.episode_config("a:X") == EpisodeConfig(1, 2)
    for step in range(3):
        st.record(outcomes("a:X", [True, True, True, False, True], f"s{step}"))
        st.record(outcomes("b:Y", [False] * 4, f"s{step}"))
        st.end_step()
    assert st.episode_config("a:X") == EpisodeConfig(2, 4)
    assert st.levels() == {"a:X": 2, "b:Y": 1}  # b:Y is already at the floor
    clone = curriculum_state(**section)
    clone.load_state_dict(st.state_dict())
    assert clone.state_dict() == st.state_dict()
    off = curriculum_state(evolve=False, max_turns=7)
    off.record(outcomes("a:X", [True] * 9, "s"))
    off.end_step()
    assert off.episode_config("a:X") == EpisodeConfig(None, 7)
    val = curriculum_state(evolve=True, eval_level=3, eval_max_turns=5)
    assert val.episode_config("a:X", validation=True) == EpisodeConfig(3, 5)


def test_settings_are_core_curriculum_options_under_one_spelling(kit: Any) -> None:
    """``+gymverse.<knob>`` on verl's command line gives core's `CurriculumOptions` (one name per knob, typed by
    Hydra or quoted strings); the old spellings and typos are refused naming the key; timeouts default to core's."""
    from gymverse.curriculum import CurriculumOptions
    from gymverse.pool import DEFAULT_RESET_TIMEOUT, DEFAULT_STEP_TIMEOUT
    from gymverse_verl.settings import GymVerseSettings

    base = [o for o in kit.readme_overrides() if "gymverse." not in o]
    knobs = ["+gymverse.evolve=true", "+gymverse.patience=2", "+gymverse.promote_at=0.7", "+gymverse.eval_level=3"]
    want: dict[str, Any] = {"evolve": True, "patience": 2, "promote_at": 0.7, "eval_level": 3}
    for horizon in ("+gymverse.horizon=[4,8,12]", "+gymverse.horizon='4,8,12'"):
        s = GymVerseSettings.from_config(kit.compose([*base, *knobs, horizon, "+gymverse.horizon_interval=5"]))
        assert s.curriculum == CurriculumOptions(**want, horizon="4,8,12", horizon_interval=5)
    fixed = GymVerseSettings.from_config(kit.compose([*base, "+gymverse.horizon=8"])).curriculum
    assert fixed.horizon_config() == {"kind": "fixed", "max_turns": 8} and fixed.active
    quoted = GymVerseSettings.from_dict({"evolve": "true", "patience": "4", "max_turns": "null"}).curriculum
    assert quoted == CurriculumOptions(evolve=True, patience=4)
    s = GymVerseSettings()
    assert (s.step_timeout, s.reset_timeout) == (DEFAULT_STEP_TIMEOUT, DEFAULT_RESET_TIMEOUT)
    assert not s.curriculum.active
    for old in ("evolution", "curriculum", "evolutoin"):
        with pytest.raises(ValueError, match=rf"unknown setting\(s\) \['gymverse.{old}'\]"):
            GymVerseSettings.from_dict({old: True})
    with pytest.raises(ValueError, match="horizon"):
        GymVerseSettings.from_dict({"horizon": "a,b"})
    with pytest.raises(ValueError, match="demote_at < promote_at"):
        GymVerseSettings.from_dict({"promote_at": 0.05})


@pytest.mark.usefixtures("ray_cluster")
def test_evolution_changes_level_at_next_reset(kit: Any, tokenizer: Any) -> None:
    from gymverse_verl.settings import GymVerseSettings

    cfg: dict[str, Any] = {"evolve": True, "actor_name": f"cur-{uuid.uuid4().hex[:8]}", "patience": 2}
    first = episodes(kit, tokenizer, [1, 2, 3], **cfg)
    assert {level(o) for o in first} == {1}
    assert all("between 1 and 10." in kit_prompt(tokenizer, o) for o in first)
    # two handles of the run's named actor are one actor: every agent-loop worker sees the same levels
    a, b = GymVerseSettings.from_dict(cfg).curriculum_service(), GymVerseSettings.from_dict(cfg).curriculum_service()
    # the agent loops recorded each finished episode once; the trainer closes the step (once per step)
    report = a.end_step()
    assert report.episodes == 3 and report.success == {GUESS: 1.0}
    episodes(kit, tokenizer, [4, 5, 6], **cfg)
    a.end_step()
    assert b.levels() == {GUESS: 2}
    second = episodes(kit, tokenizer, [1, 2, 3], **cfg)
    assert {level(o) for o in second} == {2}
    assert not any("between 1 and 10." in kit_prompt(tokenizer, o) for o in second)  # a wider range at level 2
    assert all(o.extra_fields["gymverse"]["success"] for o in second)
    # validation rows run at the fixed evaluation level and are not counted
    config = kit.make_config(**cfg)
    server = kit.ScriptedServer(tokenizer)

    async def validate() -> Any:  # agent loops are built inside the worker's running event loop
        return await kit.make_agent_loop(config, server, tokenizer).run({}, **kit.row(GUESS, 7, split="val"))

    val = asyncio.run(validate())
    assert level(val) == 1 and "between 1 and 10." in kit_prompt(tokenizer, val)
    assert a.end_step().episodes == 3  # the three level-2 episodes, not the validation one
    a.stop()


def kit_prompt(tokenizer: Any, out: Any) -> str:
    return tokenizer.decode(out.prompt_ids)


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")  # torch, on verl's lazy imports
def test_resume_from_an_older_checkpoint_restores_that_checkpoints_levels(
    kit: Any, tokenizer: Any, tmp_path: Path
) -> None:
    """verl's own ``_save_checkpoint`` / ``_load_checkpoint`` (actor group stood in): the curriculum file is in each
    ``global_step_N`` folder before verl writes anything there; resuming ``global_step_2`` of a run that went on to
    step 4 restores step 2's levels (not the newest), ``auto`` resumes step 4's, and a checkpoint folder without
    the file is refused instead of silently restarting every env at level 1."""
    from gymverse.curriculum import CHECKPOINT_FILE
    from omegaconf import OmegaConf
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl_cpu_standins import MarkerActorGroup

    name = f"cur-{uuid.uuid4().hex[:8]}"
    overrides = [o for o in kit.readme_overrides() if "gymverse.horizon" not in o]
    overrides += [f"+gymverse.actor_name={name}", "+gymverse.patience=1", "+gymverse.horizon='2,4'"]
    base = kit.compose([*overrides, "+gymverse.horizon_interval=2"])

    def trainer(**trainer_cfg: Any) -> Any:
        cfg = OmegaConf.merge(base, {"trainer": {"default_local_dir": str(tmp_path), **trainer_cfg}})
        t = get_trainer_cls("gymverse_sync")(cfg)  # a new run: its curriculum actor starts fresh
        t.actor_rollout_wg = MarkerActorGroup()
        t.train_dataloader = StatefulDataLoader(list(range(16)), batch_size=4)
        return t

    run = trainer(resume_mode="auto")
    order: list[str] = []
    save = run.actor_rollout_wg.save_checkpoint

    def first_write(local_path: str, *args: Any, **kwargs: Any) -> None:  # verl's first write into the folder
        written = os.path.exists(os.path.join(os.path.dirname(local_path), CHECKPOINT_FILE))
        order.append("curriculum" if written else "none")
        save(local_path, *args, **kwargs)

    run.actor_rollout_wg.save_checkpoint = first_write
    levels, horizons = {}, {}
    for step in (1, 2, 3, 4):
        run._curriculum.record(outcomes(GUESS, [True] * 4, f"s{step}"))
        run.end_curriculum_step({})
        run.global_steps = step
        run._save_checkpoint()
        levels[step] = run._curriculum.levels()
        horizons[step] = run._curriculum.episode_config(GUESS).max_turns
    assert order == ["curriculum"] * 4
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert [levels[s][GUESS] for s in (1, 2, 3, 4)] == [2, 3, 4, 5] and horizons[2] == 4
    assert json.loads((tmp_path / "global_step_2" / CHECKPOINT_FILE).read_text())["global_step"] == 2
    run._curriculum.stop()

    older = trainer(resume_mode="resume_path", resume_from_path=str(tmp_path / "global_step_2"))
    assert older._curriculum.levels() == {}  # fresh actor of the new run
    older._load_checkpoint()
    assert older.global_steps == 2 and older.actor_rollout_wg.loaded == ["2"]
    assert older._curriculum.levels() == levels[2] and older._curriculum.state_dict()["horizon"]["step"] == 2
    out = episodes(kit, tokenizer, [8], evolve=True, actor_name=name, patience=1, horizon="2,4", horizon_interval=2)
    assert level(out[0]) == levels[2][GUESS] == 3  # the agent loops of the resumed run play at step 2's level

    newest = trainer(resume_mode="auto")
    newest._load_checkpoint()
    assert newest.global_steps == 4 and newest._curriculum.levels() == levels[4]

    (tmp_path / "global_step_4" / CHECKPOINT_FILE).unlink()
    strict = trainer(resume_mode="auto")
    with pytest.raises(FileNotFoundError, match=r"global_step_4 has no gymverse_curriculum.json"):
        strict._load_checkpoint()
    strict._curriculum.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(600)
def test_two_runs_on_one_cluster_keep_separate_levels(tmp_path: Path) -> None:
    """Two training runs (two driver processes = two Ray jobs) on one ``ray start --head`` cluster, both with the
    default curriculum actor name: each run's trainer starts its own actor (run-scoped name), the second never
    replaces the first; one run promotes its env, the other does not, and each run's agent loops play at its own
    level. The cluster is stopped by its own process id, with every process it started."""
    import psutil

    tmp = Path(tempfile.mkdtemp(prefix="rv", dir="/tmp"))  # Ray's socket paths must stay short
    port = _free_port()
    # a cluster of its own: no token shared through ~/.ray with other clusters on this machine
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "PYTHONWARNINGS": "ignore", "RAY_AUTH_MODE": "disabled"}
    head_cmd = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}"]
    head_cmd += ["--num-cpus=2", "--include-dashboard=false", f"--temp-dir={tmp}", "--disable-usage-stats"]
    head_cmd += [f"--object-store-memory={200 * 1024**2}", f"--ray-client-server-port={_free_port()}"]
    head_log = tmp_path / "head.log"
    with open(head_log, "w") as log:
        head = subprocess.Popen(head_cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    drivers: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in head_log.read_text():
            assert head.poll() is None and time.monotonic() < deadline, head_log.read_text()[-3000:]
            time.sleep(0.5)
        driver = str(Path(__file__).with_name("verl_two_runs_driver.py"))
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        for tag, other, mode in (("a", "b", "win"), ("b", "a", "lose")):
            cmd = [sys.executable, driver, f"127.0.0.1:{port}", tag, other, str(barrier), mode]
            drivers.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        results = []
        for p in drivers:
            out, _ = p.communicate(timeout=400)
            assert p.returncode == 0, out[-4000:]
            results.append(json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:]))
    finally:
        for p in drivers:
            if p.poll() is None:
                p.kill()
                p.communicate()
        children = psutil.Process(head.pid).children(recursive=True) if head.poll() is None else []
        head.terminate()  # `ray start --block` drains (up to 30 s) and stops the processes it started
        try:
            head.wait(timeout=90)
        except subprocess.TimeoutExpired:
            head.kill()
        for child in children:  # anything it left behind, by the ids it started
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    a, b = results
    assert a["name"] != b["name"] and a["name"].startswith("gymverse_curriculum-")
    assert a["in_worker"] == a["name"] and b["in_worker"] == b["name"]
    assert a["first_levels"] == b["first_levels"] == [1, 1]
    assert a["levels"] == {GUESS: 2} and a["next_level"] == 2 and a["metrics"][f"gymverse/{GUESS}/success"] == 1.0
    assert b["levels"] == {GUESS: 1} and b["next_level"] == 1 and b["metrics"][f"gymverse/{GUESS}/success"] == 0.0
