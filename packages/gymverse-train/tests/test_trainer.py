"""The trainer on a tiny random model: PERPO grouping, evolution, checkpoint/resume, LoRA."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymverse.perpo import batch_normalize, env_normalize
from gymverse.trajectory import EpisodeTokens, Trajectory, Turn, read_jsonl
from gymverse_train import advantages
from gymverse_train.config import TrainConfig
from gymverse_train.trainer import METRICS, TRAJECTORIES, Trainer
from gymverse_train.update import policy_update

TIMING = {
    "gen_s",
    "generate_s",
    "train_s",
    "step_s",
    "tokens_per_s",
    "episodes_per_s",
    "cpu_s",
    "peak_rss_mb",
    "peak_gpu_mb",
}


def _config(**kw: Any) -> TrainConfig:
    base: dict[str, Any] = dict(
        model="tiny",
        envs=["demo:EchoTarget"],
        steps=2,
        prompts_per_env=2,
        group_size=2,
        max_new_tokens=8,
        lr=1e-3,
        save_every=0,
    )
    return TrainConfig(**{**base, **kw})


def _traj(env: str, rewards: list[float], seed: int = 0) -> Trajectory:
    t = Trajectory(env, seed, 1, [Turn("o", "a", r) for r in rewards], episode_id=f"{env}{seed}{rewards}")
    mask: list[int] = []
    ends = []
    for _ in rewards:
        mask += [1, 1, 0]
        ends.append(len(mask) - 1)
    t.tokens = EpisodeTokens([0], [5] * len(mask), mask, None, ends)
    return t


def test_perpo_normalizes_per_env_and_grpo_per_instance() -> None:
    trajs = [_traj("a", [1.0]), _traj("a", [0.0]), _traj("b", [0.1]), _traj("b", [0.0], seed=1)]
    tok = advantages.assign(trajs, "perpo")
    assert [t.turns[0].advantage for t in trajs] == pytest.approx([1, -1, 1, -1])
    assert np.asarray(tok[2]).tolist() == pytest.approx([1, 1, 0])  # model tokens carry it, env tokens 0
    flat = np.array([1.0, 0.0, 0.1, 0.0])
    assert [t.turns[0].advantage for t in trajs] == pytest.approx(env_normalize(flat, ["a", "a", "b", "b"]))
    advantages.assign(trajs, "rebn")
    assert [t.turns[0].advantage for t in trajs] == pytest.approx(batch_normalize(flat))
    advantages.assign(trajs, "grpo")  # b's episodes are different instances (seeds): no group baseline
    assert [t.turns[0].advantage for t in trajs] == pytest.approx([1, -1, 0, 0])


def test_multi_turn_returns_place_on_each_turns_tokens() -> None:
    trajs = [_traj("a", [0.0, 1.0]), _traj("a", [0.0, 0.0, 0.0])]
    tok = advantages.assign(trajs, "perpo")
    a = [float(turn.advantage or 0.0) for turn in trajs[0].turns]
    assert all(turn.advantage is not None for turn in trajs[0].turns)
    assert np.asarray(tok[0]).tolist() == pytest.approx([a[0], a[0], 0, a[1], a[1], 0])
    assert a[0] > 0 and a[1] > 0  # G = [1, 1] against [0, 0, 0]


def test_trainer_uses_the_core_perpo(tokenizer: Any, make_model: Any, tmp_path: Path, monkeypatch: Any) -> None:
    seen: list[list[str]] = []
    real = advantages.advantages

    def spy(batch: Any, *args: Any, **kw: Any) -> Any:
        seen.append(batch.env_ids)
        return real(batch, *args, **kw)

    monkeypatch.setattr(advantages, "advantages", spy)  # the one core PERPO entry point
    cfg = _config(envs=["demo:EchoTarget", "game:GuessTheNumber"], max_turns=2, steps=1)
    trainer = Trainer(cfg, tmp_path, model=make_model(), tokenizer=tokenizer)
    m = trainer.train_step()
    assert seen == [["demo:EchoTarget"] * 4 + ["game:GuessTheNumber"] * 4]
    assert set(m["success_by_env"]) == {"demo:EchoTarget", "game:GuessTheNumber"}
    rows = list(read_jsonl(tmp_path / TRAJECTORIES))
    assert len(rows) == 8 and all(r.metrics["step"] == 1 for r in rows)
    assert all(turn.advantage is not None for r in rows for turn in r.turns)
    assert max(len(r.turns) for r in rows if r.env_id == "game:GuessTheNumber") <= 2  # the curriculum's cap


def test_steps_play_the_rows_make_dataset_writes(tokenizer: Any, make_model: Any, tmp_path: Path) -> None:
    from gymverse.rollout import episode_specs

    envs = ["demo:EchoTarget", "game:GuessTheNumber"]
    cfg = _config(envs=envs, prompts_per_env=2, group_size=2, seed=11)
    trainer = Trainer(cfg, tmp_path, model=make_model(), tokenizer=tokenizer)
    played = []
    for step in range(2):
        trainer.step = step
        seeds = trainer._seeds()
        ids = [s.env_id for s in trainer.sessions]
        played += sorted({(e, sd) for e, sd in zip(ids, seeds)})
    rows = episode_specs(envs, 4, seed=11)  # what every adapter's `make-dataset --n 4 --seed 11` writes
    assert sorted(played) == sorted((r.env_id, r.seed) for r in rows)


def test_void_episodes_train_no_token() -> None:
    ok, crashed = _traj("a", [1.0]), _traj("a", [0.0, 0.0], seed=1)
    crashed.stop_reason, crashed.error = "env_error", "OSError: disk on fire"
    other = _traj("a", [0.0], seed=2)
    tok = advantages.assign([ok, crashed, other], "perpo")
    assert not np.asarray(tok[1]).any()  # the crashed episode: no advantage on any token
    assert np.asarray(tok[0]).max() == pytest.approx(1.0) and np.asarray(tok[2]).min() == pytest.approx(-1.0)


def test_evolution_changes_the_next_reset(tokenizer: Any, make_model: Any, tmp_path: Path) -> None:
    cfg = _config(evolve=True, level=4, patience=1, demote_at=0.5, promote_at=1.0)
    trainer = Trainer(cfg, tmp_path, model=make_model(), tokenizer=tokenizer)
    m1 = trainer.train_step()
    assert m1["success"] <= 0.5  # a random tiny model does not echo words
    assert m1["level_changes"] == [
        {
            "env_id": "demo:EchoTarget",
            "old_level": 4,
            "new_level": 3,
            "success_rate": m1["success"],
            "update": 1,
            "reason": "demote",
        }
    ]
    m2 = trainer.train_step()
    rows = list(read_jsonl(tmp_path / TRAJECTORIES))
    assert {r.complexity for r in rows if r.metrics["step"] == 1} == {4}
    assert {r.complexity for r in rows if r.metrics["step"] == 2} == {3}
    assert m2["complexity_by_env"] == {"demo:EchoTarget": 3.0}


def _strip(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in TIMING}


def test_checkpoint_resume_gives_identical_next_step(tokenizer: Any, make_model: Any, tmp_path: Path) -> None:
    cfg = _config(evolve=True, patience=1, steps=3)
    a = Trainer(cfg, tmp_path / "a", model=make_model(), tokenizer=tokenizer)
    a.train_step()
    a.save()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = [_strip(a.train_step()), _strip(a.train_step())]
    b = Trainer.resume(tmp_path / "b", model=make_model(seed=123), tokenizer=tokenizer)  # weights come from disk
    assert b.step == 1
    got = [_strip(b.train_step()), _strip(b.train_step())]
    assert got == expected
    ta = [t.to_dict() for t in read_jsonl(tmp_path / "a" / TRAJECTORIES)]
    tb = [t.to_dict() for t in read_jsonl(tmp_path / "b" / TRAJECTORIES)]
    for t in ta + tb:
        t.pop("episode_id")
    assert ta == tb


def test_resume_drops_records_written_after_the_checkpoint(tokenizer: Any, make_model: Any, tmp_path: Path) -> None:
    t = Trainer(_config(save_every=1), tmp_path, model=make_model(), tokenizer=tokenizer)
    t.train_step()
    t.config.save_every = 0
    t.train_step()  # step 2 is written but never checkpointed (the run "died")
    assert len((tmp_path / METRICS).read_text().splitlines()) == 2
    r = Trainer.resume(tmp_path, model=make_model(), tokenizer=tokenizer)
    assert r.step == 1
    assert len((tmp_path / METRICS).read_text().splitlines()) == 1
    assert {x.metrics["step"] for x in read_jsonl(tmp_path / TRAJECTORIES)} == {1}


def test_lora_trains_only_the_adapter(tokenizer: Any, make_model: Any, action_sample: Any, tmp_path: Path) -> None:
    pytest.importorskip("peft")
    import torch

    trainer = Trainer(_config(lora=True, lora_rank=4, lr=1e-2), tmp_path, model=make_model(), tokenizer=tokenizer)
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert lora and all("lora_" in n for n in lora)
    m = trainer.train_step()
    assert m["peak_rss_mb"] > 0
    policy_update(trainer.model, trainer.optimizer, [action_sample(1.0)], trainer.update_config)
    params = dict(trainer.model.named_parameters())
    assert all(torch.equal(v, params[n]) for n, v in frozen.items())
    assert any(not torch.equal(v, params[n]) for n, v in lora.items())
