"""RL2 0.0.2's real training loop on CPU with GymVerse installed: rollout, PERPO, evolution, checkpoints.

`PPOTrainer.train` (RL2's loop) runs for real with RL2's `Rollout` (which launches the SGLang stand-in server and
router processes with RL2's own code), RL2's dataset/dataloader over our export, RL2's `compute_advantages`,
`save_ckpt`/`load_ckpt` (torch.distributed.checkpoint) and logging. Stand-ins only for GPU paths: the FSDP actor
(it records what it is asked to train on), the weight sync to SGLang (`Rollout.update`) and the HF model save.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymverse_rl2.episodes
import numpy as np
import pytest
import torch
from gymverse.curriculum.options import CurriculumOptions
from gymverse.curriculum.service import CHECKPOINT_FILE as STATE_FILE
from gymverse.testing.parity import expected_advantages as core_advantages
from gymverse.trajectory import Trajectory
from gymverse_rl2.cli import write_dataset
from gymverse_rl2.episodes import state_dict_of
from gymverse_rl2.patch import install, uninstall
from gymverse_rl2.settings import Settings, current
from gymverse_rl2.train import env_path, launch_settings
from rl2_harness import RL2Trace, rl2_config, stop_children

ENVS = ["game:GuessTheNumber", "game:LightsOut"]
EVOLVE = Settings(perpo=True, curriculum=CurriculumOptions(evolve=True, patience=1, max_turns=10))
RL2_KEYS = {"states", "eos_mask", "position_ids", "actions", "action_mask", "llm_logps", "rewards"}


class ActorStandIn:
    """Stands in for RL2's FSDP `Actor` (GPU): records each batch it is asked to train on."""

    def __init__(self, config: Any, tokenizer: Any) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.batches: list[dict[str, torch.Tensor]] = []

    def update(self, tensor_dict: dict[str, torch.Tensor], step: int) -> None:
        self.batches.append({k: v.clone() for k, v in tensor_dict.items()})


class Stack:
    """RL2's PPO trainer assembled like `PPOTrainer.__init__`, minus the GPU actor."""

    def __init__(self, root: Path, tokenizer_dir: Path, overrides: list[str]) -> None:
        from RL2.trainer import Trainer
        from RL2.trainer.ppo import PPOTrainer
        from RL2.workers import Rollout
        from transformers import AutoTokenizer

        data = root / "gymverse.jsonl"
        write_dataset(ENVS, 4, str(data), seed=100)
        self.config = rl2_config(
            [
                f"actor.model_name={tokenizer_dir}",
                f"train_data.path={data}",
                "train_data.prompts_per_rollout=4",
                "train_data.responses_per_prompt=2",
                f"test_data.path={data}",
                "rollout.train_sampling_params.max_new_tokens=48",
                "actor.max_length_per_device=4096",
                f"rollout.env_path={env_path()}",
                "rollout.dynamic_filtering=false",
                f"trainer.save_dir={root / 'ckpt'}",
                "trainer.save_freq=1",
                "trainer.use_wandb=false",
                "trainer.experiment_name=gymverse",
                *overrides,
            ]
        )
        self.trainer = PPOTrainer.__new__(PPOTrainer)
        Trainer.__init__(self.trainer, self.config)
        self.trainer.actor = ActorStandIn(self.config.actor, AutoTokenizer.from_pretrained(str(tokenizer_dir)))
        self.trainer.train_dataloader = self.trainer.get_dataloader(True)
        self.trainer.test_dataloader = self.trainer.get_dataloader(False)
        self.trainer.critic = None
        self.trainer.rollout = Rollout(self.config.rollout)


@pytest.fixture(scope="module")
def played() -> Iterator[list[Trajectory]]:
    """Every trajectory GymVerse played, in completion order (wraps our own `play`, not RL2)."""
    seen: list[Trajectory] = []
    real = gymverse_rl2.episodes.play

    async def recording(*args: Any, **kwargs: Any) -> Trajectory:
        traj = await real(*args, **kwargs)
        seen.append(traj)
        return traj

    gymverse_rl2.episodes.play = recording
    yield seen
    gymverse_rl2.episodes.play = real


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, dist_group: None, played: list[Trajectory]
) -> Iterator[Stack]:
    import RL2.trainer.ppo as ppo
    from RL2.workers import Rollout

    loop = asyncio.new_event_loop()  # RL2 0.0.2 runs rollouts on `asyncio.get_event_loop()`, as in a fresh process
    asyncio.set_event_loop(loop)
    mp = pytest.MonkeyPatch()
    mp.setenv("GYMVERSE_STANDIN_SLIP", "0.2")
    # GPU paths: weight sync to the SGLang engine and the HF model export of the FSDP actor
    mp.setattr(Rollout, "update", lambda self, actor, step: None)
    mp.setattr(ppo, "save_model", lambda trainer, worker, rm=False: None)
    try:
        stack = Stack(tmp_path_factory.mktemp("rl2"), tokenizer_dir, [])
        install(launch_settings(stack.config, EVOLVE))
        yield stack
    finally:
        uninstall()
        mp.undo()
        stop_children()
        asyncio.set_event_loop(None)
        loop.close()


def first_batch(trainer: Any) -> list[dict[str, Any]]:
    """Four dataset rows through RL2's `RLDataset` and its `collate_fn` (responses_per_prompt copies each)."""
    dataset = trainer.train_dataloader.dataset
    return dataset.collate_fn([dataset[i] for i in range(4)])


def ranges(states: str) -> list[int]:
    return [int(n) for n in re.findall(r"between 1 and (\d+)", states)]


@pytest.fixture(scope="module")
def trained(stack: Stack) -> set[str]:
    """RL2's `PPOTrainer.train` run once (2 steps); returns the RL2 functions that ran."""
    with RL2Trace() as trace:
        stack.trainer.train()
    return trace.names


def test_train_loop_runs_rl2_with_perpo_and_evolution(
    stack: Stack, trained: set[str], played: list[Trajectory]
) -> None:
    trainer = stack.trainer
    # RL2's own functions ran: trainer loop, rollout orchestration, SGLang client, data, advantages, checkpoints
    ran = trained
    expected = {
        "RL2.trainer.ppo.PPOTrainer.train",
        "RL2.workers.rollout.Rollout.__call__",  # reached through our wrapper
        "RL2.utils.sglang.async_generate",
        "RL2.utils.sglang.make_request",
        "RL2.datasets.rl.RLDataset.__getitem__",
        "RL2.datasets.rl.RLDataset.collate_fn",
        "RL2.datasets.rl.state_dict_to_tensor_dict",
        "RL2.datasets.base.get_tensor_dict",
        "RL2.datasets.base.pack_tensor_dicts",
        "RL2.utils.algorithms.compute_advantages",
        "RL2.utils.algorithms.compute_reinforce_adv",
        "RL2.utils.checkpointing.save_ckpt",
        "RL2.utils.checkpointing.get_ckpt",
        "RL2.utils.checkpointing.load_ckpt",
        "RL2.utils.logging.gather_and_log",
        "RL2.utils.logging.time_logger.<locals>.decorator.<locals>.wrapper",
    }
    assert expected <= ran, sorted(expected - ran)
    assert "RL2.workers.rollout.Rollout.rollout" not in ran  # RL2 0.0.2's own text loop is replaced (legacy.py)

    steps = len(trainer.train_dataloader)
    assert steps == 2 and len(trainer.actor.batches) == steps
    per_step = len(played) // steps
    assert per_step == 8  # 4 prompts x 2 responses
    for k, batch in enumerate(trainer.actor.batches):
        assert set(batch) == RL2_KEYS | {"advantages"}  # the env tag never reaches RL2's workers
        trajs = played[k * per_step : (k + 1) * per_step]
        expected_rows = expected_advantages(trajs, batch)
        assert torch.allclose(batch["advantages"], expected_rows, atol=1e-5)
        assert batch["advantages"].abs().sum() > 0  # RL2's per-prompt grouping gives 0 here (identical copies)

    # evolution: GuessTheNumber was solved in step 1, so step 2 reset it at level 2 (a wider range)
    guess = [[t for t in played[k * per_step : (k + 1) * per_step] if t.env_id == ENVS[0]] for k in range(steps)]
    assert all(t.success for t in guess[0])
    assert {t.complexity for t in guess[0]} == {1} and {t.complexity for t in guess[1]} == {2}
    tok = trainer.actor.tokenizer
    first = {n for row in trainer.actor.batches[0]["states"] for n in ranges(tok.decode(row))}
    second = {n for row in trainer.actor.batches[1]["states"] for n in ranges(tok.decode(row))}
    assert first == {10} and max(second) > 10  # the next reset's observation, as trained on
    service = current().curriculum
    assert service is not None

    # the curriculum state is saved inside each RL2 checkpoint directory, next to RL2's own files
    save_dir = Path(stack.config.trainer.save_dir)
    states = [json.loads((save_dir / f"step{step}" / STATE_FILE).read_text()) for step in (1, 2)]
    assert all((save_dir / f"step{step}" / ".metadata").exists() for step in (1, 2))  # RL2's dcp checkpoints
    assert states[0]["controller"]["envs"][ENVS[0]]["level"] == 2
    assert {e: v["level"] for e, v in states[1]["controller"]["envs"].items()} == service.levels()


def expected_advantages(trajs: list[Trajectory], batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The core's PERPO on the played episodes (`gymverse.testing.parity.expected_advantages`) placed into RL2's
    rows (RL2 shifts tokens by one)."""
    core = core_advantages(trajs)
    by_states = {}
    for traj, adv in zip(trajs, core):
        assert traj.tokens is not None
        states = state_dict_of(traj)["states"][:-1]
        row = np.zeros(len(states))
        start = len(traj.tokens.prompt_ids) - 1
        row[start : start + len(adv)] = adv[: len(states) - start]
        by_states[tuple(states)] = row
    out = torch.zeros(batch["states"].shape)
    for i, (row, mask) in enumerate(zip(batch["states"], batch["action_mask"])):
        n = int(batch["eos_mask"][i].nonzero()[0]) + 1
        out[i, :n] = torch.tensor(by_states[tuple(row[:n].tolist())], dtype=torch.float32)
        out[i] *= mask
    return out


def test_checkpoint_round_trip_restores_levels_and_next_reset(
    stack: Stack, trained: set[str], played: list[Trajectory]
) -> None:
    import RL2.trainer.ppo as ppo

    trainer = stack.trainer
    service = current().curriculum
    assert service is not None
    saved = service.levels()
    install(launch_settings(stack.config, EVOLVE))  # a fresh process: initial levels
    fresh = current().curriculum
    assert fresh is not None and fresh.levels() == {}
    trainer.config.trainer.load_ckpt_from = "latest"
    try:
        step = ppo.load_ckpt(trainer, (trainer.actor, trainer.critic, trainer.rollout))  # RL2's own resume
    finally:
        trainer.config.trainer.load_ckpt_from = None
    assert step == 2
    assert fresh.levels() == saved

    # resuming an older checkpoint restores that checkpoint's levels (the curriculum file is per step folder)
    step1 = Path(stack.config.trainer.save_dir) / "step1"
    levels1 = {e: v["level"] for e, v in json.loads((step1 / STATE_FILE).read_text())["controller"]["envs"].items()}
    install(launch_settings(stack.config, EVOLVE))
    trainer.config.trainer.load_ckpt_from = str(step1)
    try:
        assert ppo.load_ckpt(trainer, (trainer.actor, trainer.critic, trainer.rollout)) == 1
        assert current().curriculum.levels() == levels1
        (step1 / STATE_FILE).rename(step1 / "moved.json")  # a checkpoint without the file: an error, not a reset
        with pytest.raises(FileNotFoundError, match="resuming it would restart every env"):
            ppo.load_ckpt(trainer, (trainer.actor, trainer.critic, trainer.rollout))
        (step1 / "moved.json").rename(step1 / STATE_FILE)
    finally:
        trainer.config.trainer.load_ckpt_from = None
    fresh = current().curriculum
    fresh.load_state_dict(service.state_dict())

    # the next reset after resuming uses the restored level
    state = fresh.state_dict()
    state["controller"]["envs"][ENVS[0]]["level"] = 3
    fresh.load_state_dict(state)
    before = len(played)
    trainer.rollout(first_batch(trainer), True, 3)
    guess = [t for t in played[before:] if t.env_id == ENVS[0]]
    assert guess and {t.complexity for t in guess} == {3}


def test_perpo_off_leaves_rl2_bit_identical(stack: Stack, trained: set[str]) -> None:
    import RL2.trainer.ppo as ppo
    import RL2.utils.algorithms as algorithms

    trainer = stack.trainer
    data_list = first_batch(trainer)
    batches = {}
    for perpo in (True, False):
        install(Settings(perpo=perpo))
        tensor_dict, cu_seqs = trainer.rollout(copy.deepcopy(data_list), True, 10)
        batches[perpo] = (tensor_dict, cu_seqs)
    uninstall()
    pristine = algorithms.compute_advantages
    install(Settings())  # every option off
    assert algorithms.compute_advantages is pristine and ppo.compute_advantages is pristine
    on, off = batches[True], batches[False]
    assert set(on[0]) == set(off[0]) == RL2_KEYS
    assert torch.equal(on[1], off[1])
    for key in RL2_KEYS:
        assert torch.equal(on[0][key], off[0][key]), key  # PERPO changes nothing RL2 trains on but advantages
    ours = {k: v.clone() for k, v in off[0].items()}
    theirs = {k: v.clone() for k, v in off[0].items()}
    ppo.compute_advantages(stack.config.adv, ours, off[1], 10)
    pristine(stack.config.adv, theirs, off[1], 10)
    assert torch.equal(ours["advantages"], theirs["advantages"])
    install(Settings(perpo=True))
    perpo_batch = {k: v.clone() for k, v in on[0].items()}
    current().pending = None
    with pytest.raises(RuntimeError, match="no GymVerse episode records"):
        ppo.compute_advantages(stack.config.adv, perpo_batch, on[1], 10)


def test_broken_env_row_ends_only_its_episode(stack: Stack, trained: set[str], played: list[Trajectory]) -> None:
    """A row naming an env that cannot be built is an error-truncated episode; the batch and curriculum go on."""
    trainer = stack.trainer
    install(launch_settings(stack.config, EVOLVE))
    data_list = first_batch(trainer)
    data_list[0] = {"extra_info": {"env_id": "game:DoesNotExist", "seed": 1, "complexity": None}}
    before = len(played)
    tensor_dict, cu_seqs = trainer.rollout(data_list, True, 20)
    broken = [t for t in played[before:] if t.env_id == "game:DoesNotExist"]
    assert len(broken) == 1 and broken[0].error and "DoesNotExist" in broken[0].error
    assert broken[0].stop_reason == "reset_error" and not broken[0].turns
    assert int(cu_seqs[-1]) == len(data_list) == tensor_dict["states"].shape[0]
    assert int(tensor_dict["action_mask"][0].sum()) == 0  # nothing of it is trained on
    assert int(tensor_dict["action_mask"][1:].sum(-1).min()) > 0
    service = current().curriculum
    assert service is not None and "game:DoesNotExist" not in service.levels()  # not counted as a failure
