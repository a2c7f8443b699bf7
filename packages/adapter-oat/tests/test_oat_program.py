"""oat's real program on CPU: `gymverse-oat` flags -> `oat.interface.get_program` -> launchpad nodes (forked) ->
`LearnerBase.run` with our learner and actor: collect -> PERPO -> learn (DeepSpeed ZeRO-2 optimizer steps) ->
weight sync to the actor's engine -> curriculum evolution -> checkpoint with the curriculum -> resume."""

from __future__ import annotations

import glob
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import oat
import pytest
import torch
from gymverse.perpo import env_normalize, returns_from_lists
from gymverse_oat.cli import parse_args, train
from gymverse_oat.learner import GymVerseLearner

ENV = "game:GuessTheNumber"

# oat functions that must run in each node's process for a collect -> learn cycle (recorded by the launcher).
DRIVER_CALLS = {"oat.interface:get_program", "oat.args:default_args_validation"}
LEARNER_CALLS = {
    "oat.learners.base:LearnerBase.run",
    "oat.learners.base:LearnerBase._init",
    "oat.learners.rl:RLLearner._init",
    "oat.algorithms.ppo:PPOLearner._init",
    "oat.algorithms.ppo_multiturn:PPOMultiTurnLearner._init",
    "oat.utils.deepspeed:DeepspeedStrategy.setup_distributed",
    "oat.utils.deepspeed:DeepspeedStrategy.create_optimizer",
    "oat.utils.deepspeed:DeepspeedStrategy._ds_init_train_model",
    "oat.model:LLM.__init__",
    "oat.algorithms.ppo_multiturn:MultiTurnFeedbackCollector.collect_feedback",
    "oat.utils.ipc:PlasmaShmClient.deserialize_ipc",
    "oat.algorithms.ppo:PPOLearner.learn",
    "oat.algorithms.ppo_multiturn:MultiTurnTransitionDataset.__init__",
    "oat.algorithms.ppo_multiturn:PPOMultiTurnLearner.learning_step",
    "oat.algorithms.ppo:PPOLearner.get_batch_logps",
    "oat.utils.deepspeed:DeepspeedStrategy.backward",
    "oat.utils.deepspeed:DeepspeedStrategy.optimizer_step",
    "oat.utils.deepspeed:DeepspeedStrategy.all_reduce",
    "oat.learners.base:LearnerBase.sync_params_to_actors",
    "oat.learners.base:LearnerBase._broadcast_to_vllm",
    "oat.learners.base:LearnerBase.eval_and_log",
    "oat.utils.deepspeed:DeepspeedStrategy.save_model",
    "oat.utils.deepspeed:DeepspeedStrategy.save_ckpt",
}
ACTOR_CALLS = {
    "oat.actors.base:ActorBase.init",
    "oat.actors.base:ActorBase.generate",
    "oat.actors.base:ActorBase.init_process_group",
    "oat.actors.base:ActorBase.update_weight",
    "oat.utils.distributed:WorkerWrap.init_process_group",
    "oat.algorithms.ppo_multiturn:PPOMultiTurnActor.step",
    "oat.utils.ipc:PlasmaShmClient.serialize_ipc",
}


# a CPU-sized run: 1 "GPU" (actor and learner collocated), float32, 4 transitions per step, 2 envs in parallel
BASE_FLAGS = [
    *("--env_id", ENV, "--gpus", "1", "--collocate", "--no-bf16", "--no-flash_attn", "--shm_size_mb", "64"),
    *("--rollout_batch_size", "4", "--rollout_batch_size_per_device", "4", "--pi_buffer_maxlen_per_device", "4"),
    *("--num_env", "2"),
    *("--train_batch_size", "4", "--train_batch_size_per_device", "1", "--generate_max_length", "24"),
    *("--learning_rate", "1e-2", "--lr_warmup_ratio", "0", "--eval_steps", "-1", "--seed", "7"),
    *("--save_steps", "100", "--save_ckpt", "--dump_all_buffer", "--max_save_num", "3"),
]


class RecordingLearner(GymVerseLearner):
    """Our learner, writing down the episodes it got, what oat's `learning_step` received and the loss on it."""

    def process_feedback_data(self, data_list: list[list[Any]]) -> None:
        episodes = [
            {"env": ep[0].env_id, "id": ep[0].episode_id, "rewards": [t.rewards for t in ep]} for ep in data_list
        ]
        with open(os.environ["GYMVERSE_TEST_EPISODES"], "a") as fh:
            fh.write(json.dumps(episodes) + "\n")
        super().process_feedback_data(data_list)

    def learning_step(self, trajectory: dict[str, Any]) -> dict[str, Any]:
        infos = super().learning_step(trajectory)
        with open(os.environ["GYMVERSE_TEST_RECORD"], "a") as fh:
            rec = {"advantages": [float(a) for a in trajectory["advantages"]], "pg_loss": float(infos["pg_loss"])}
            fh.write(json.dumps(rec) + "\n")
        return infos


def run_program(tmp: Path, model: Path, *flags: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Launch oat's program like `gymverse-oat` does; return traces, the run directory and the records."""
    trace_dir, save_root = tmp / "trace", tmp / "out"
    trace_dir.mkdir()
    monkeypatch.setenv("LP_STANDIN_TRACE_DIR", str(trace_dir))
    monkeypatch.setenv("GYMVERSE_TEST_RECORD", str(tmp / "learning_steps.jsonl"))
    monkeypatch.setenv("GYMVERSE_TEST_EPISODES", str(tmp / "episodes.jsonl"))
    driver: set[str] = set()
    oat_dir = os.path.dirname(oat.__file__)

    def trace(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(oat_dir):
            driver.add(f"{frame.f_globals['__name__']}:{frame.f_code.co_qualname}")

    sys.setprofile(trace)
    args = parse_args([*BASE_FLAGS, "--pretrain", str(model), "--save_path", str(save_root), *flags])
    try:
        train(args, learner_cls=RecordingLearner)
    finally:
        sys.setprofile(None)
    (run_dir,) = glob.glob(str(save_root / "*"))
    with open(os.path.join(run_dir, "all_buffer.pkl"), "rb") as fh:
        (buffer,) = pickle.load(fh)  # oat gathers one buffer per learner rank
    steps = [json.loads(line) for line in (tmp / "learning_steps.jsonl").read_text().splitlines()]
    traces = {p.stem: set(json.loads(p.read_text())) for p in trace_dir.glob("*.json")}
    traces["driver"] = driver
    episodes = [json.loads(line) for line in (tmp / "episodes.jsonl").read_text().splitlines()]
    out = {"run_dir": Path(run_dir), "buffer": list(buffer), "steps": steps, "traces": traces, "episodes": episodes}
    return out


def expected_advantages(step_episodes: list[dict[str, Any]], gamma: float) -> dict[tuple[str, int], float]:
    """The core's PERPO over every turn the learner received in one step, by (episode id, turn)."""
    rets = returns_from_lists([ep["rewards"] for ep in step_episodes], gamma)
    adv = env_normalize(np.concatenate(rets), [ep["env"] for ep, r in zip(step_episodes, rets) for _ in r])
    keys = [(ep["id"], k) for ep, r in zip(step_episodes, rets) for k in range(len(r))]
    return dict(zip(keys, adv.tolist(), strict=True))


@pytest.fixture(scope="module")
def evolving_run(policy_model: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four collect -> learn steps with a policy that always solves the env, evolution on."""
    tmp = tmp_path_factory.mktemp("run1")
    model = policy_model(tmp / "model", "guess_binary")
    with pytest.MonkeyPatch.context() as mp:
        flags = ("--evolve", "--norm_return", "--gamma", "0.9", "--max_train", "16")
        out = run_program(tmp, model, *flags, monkeypatch=mp)
    out["model"] = model
    return out


def test_oat_code_paths_ran(evolving_run: dict[str, Any]) -> None:
    traces = evolving_run["traces"]
    assert set(traces) == {"driver", "ipc_server_0", "actor_0_0", "learner_0_0"}
    assert traces["driver"] >= DRIVER_CALLS, sorted(DRIVER_CALLS - traces["driver"])
    assert traces["learner_0_0"] >= LEARNER_CALLS, sorted(LEARNER_CALLS - traces["learner_0_0"])
    assert traces["actor_0_0"] >= ACTOR_CALLS, sorted(ACTOR_CALLS - traces["actor_0_0"])
    assert "oat.utils.ipc:PlasmaShmServer.run" in traces["ipc_server_0"]


def test_learning_step_trains_on_perpo_advantages(evolving_run: dict[str, Any]) -> None:
    buffer, steps = evolving_run["buffer"], evolving_run["steps"]
    assert len(buffer) == 16 and len(steps) == 4  # 4 kept transitions per step, one learning step each
    for k, rec in enumerate(steps):
        batch = buffer[4 * k : 4 * k + 4]
        want = expected_advantages(evolving_run["episodes"][k], 0.9)
        expected = [want[(t.episode_id, t.turn)] for t in batch]  # normalized over all turns, then subsampled
        np.testing.assert_allclose([t.info["advantages"] for t in batch], expected, rtol=1e-6, atol=1e-6)
        # oat's dataset/collate handed exactly these advantages to the loss (no shuffling for drgrpo)
        np.testing.assert_allclose(rec["advantages"], expected, rtol=1e-6, atol=1e-6)
        assert np.isfinite(rec["pg_loss"])
    # returns are per-turn discounted returns: the success reward 1 of the last turn, discounted 0.9 per turn
    for t in buffer:
        turns_to_go = np.log(t.info["returns"]) / np.log(0.9)
        assert turns_to_go == pytest.approx(round(turns_to_go), abs=1e-6)
        assert (round(turns_to_go) == 0) == t.done


def test_optimizer_steps_changed_the_saved_policy(evolving_run: dict[str, Any]) -> None:
    from transformers import AutoModelForCausalLM

    (saved,) = glob.glob(str(evolving_run["run_dir"] / "saved_models" / "step_*"))
    before = AutoModelForCausalLM.from_pretrained(evolving_run["model"]).state_dict()
    after = AutoModelForCausalLM.from_pretrained(saved).state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2, changed


def test_evolution_raises_the_level_the_next_reset_sees(evolving_run: dict[str, Any]) -> None:
    buffer = evolving_run["buffer"]
    assert all(t.success for t in buffer)  # the scripted policy solves every episode: success 1.0 per batch
    levels = [sorted({t.complexity for t in buffer[4 * k : 4 * k + 4]}) for k in range(4)]
    assert levels == [[1], [1], [1], [2]]  # 3 batches at >= 0.8, then the actor's next reset is at level 2
    step4 = buffer[12:]
    assert all("between 1 and 10." not in t.obs for t in step4 if t.turn == 0)


def test_checkpoint_carries_the_curriculum_and_resume_restores_it(
    evolving_run: dict[str, Any], policy_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ckpt,) = glob.glob(str(evolving_run["run_dir"] / "checkpoints" / "step_*"))
    state = torch.load(os.path.join(ckpt, "mp_rank_00_model_states.pt"), weights_only=False)
    saved = state["gymverse_curriculum"]
    assert saved["controller"]["envs"][ENV]["level"] == 2
    assert saved["mixer"]["env_ids"] == [ENV]

    model = policy_model(tmp_path / "model", "guess_binary")
    resume = ("--resume_dir", os.path.dirname(ckpt), "--resume_tag", os.path.basename(ckpt))
    out = run_program(
        tmp_path, model, "--evolve", "--norm_return", "--max_train", "4", *resume, monkeypatch=monkeypatch
    )
    assert "oat.utils.deepspeed:DeepspeedStrategy.load_ckpt" in out["traces"]["learner_0_0"]
    assert {t.complexity for t in out["buffer"]} == {2}  # the first resets after resuming are at the saved level


def test_mixed_env_batches_get_per_env_statistics_and_their_own_levels(policy_model: Any, tmp_path: Path) -> None:
    # two envs in every round of episodes; the scripted policy solves GuessTheNumber and fails HiddenArrayPeak
    peak = "algorithm:HiddenArrayPeak"
    model = policy_model(tmp_path / "model", "guess_binary")
    flags = ("--env_id", f"{ENV}|{peak}", "--env_mix", "round_robin", "--horizon", "4", "--max_train", "16")
    with pytest.MonkeyPatch.context() as mp:
        out = run_program(tmp_path, model, *flags, "--evolve", "--norm_return", "--gamma", "0.9", monkeypatch=mp)
    buffer = out["buffer"]
    steps = [buffer[4 * k : 4 * k + 4] for k in range(4)]
    assert {t.env_id for t in buffer} == {ENV, peak}
    assert any(len({t.env_id for t in step}) == 2 for step in steps)
    for step, rec, received in zip(steps, out["steps"], out["episodes"], strict=True):
        want = expected_advantages(received, 0.9)  # per env, not over the mixed batch
        expected = [want[(t.episode_id, t.turn)] for t in step]
        np.testing.assert_allclose([t.info["advantages"] for t in step], expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(rec["advantages"], expected, rtol=1e-6, atol=1e-6)
    assert max(t.turn for t in buffer) <= 3  # the horizon schedule caps episodes at 4 turns
    assert all(t.success for s in steps[:3] for t in s if t.env_id == ENV)  # level 1: solved within 4 turns
    assert not any(t.success for t in buffer if t.env_id == peak)
    levels = {env: [sorted({t.complexity for t in s if t.env_id == env}) for s in steps] for env in (ENV, peak)}
    assert levels[ENV][-1] == [2] and all(lv in ([], [1]) for lv in levels[ENV][:3])
    assert all(lv in ([], [1]) for lv in levels[peak])  # failing at the lowest level: nowhere lower to go
