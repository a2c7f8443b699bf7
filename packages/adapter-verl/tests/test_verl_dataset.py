"""``gymverse-verl make-dataset`` rows, read back through verl's own ``RLHFDataset``; plugin registration."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from typing import Any

import pytest


def test_make_dataset_rows_load_in_verl(tmp_path: Any, tokenizer: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows are core's `EpisodeSpec`s in core's scheme (round-robin, round i at seed + i, no level: the
    curriculum's), read back from verl's own ``RLHFDataset`` item with `EpisodeSpec.from_dict`."""
    import pandas as pd
    from gymverse.rollout import EpisodeSpec, episode_specs
    from gymverse_verl.dataset import main
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = tmp_path / "train.parquet"
    flags = ["--envs", "game:GuessTheNumber, logic:Nonogram", "--n", "3", "--seed", "5"]
    assert main(["make-dataset", *flags, "--out", str(out)]) == 0
    assert "wrote 6 rows" in capsys.readouterr().out
    df = pd.read_parquet(out)
    core = episode_specs(["game:GuessTheNumber", "logic:Nonogram"], 3, seed=5)
    assert [EpisodeSpec.from_dict(e) for e in df["extra_info"]] == core  # the same episodes as every framework
    assert [e["seed"] for e in df["extra_info"]] == [5, 5, 6, 6, 7, 7]
    assert list(df["data_source"]) == ["game:GuessTheNumber", "logic:Nonogram"] * 3
    assert {e["complexity"] for e in df["extra_info"]} == {None} and set(df["agent_name"]) == {"gymverse_agent"}
    again = tmp_path / "again.parquet"
    assert main(["make-dataset", *flags, "--out", str(again)]) == 0
    assert pd.read_parquet(again).equals(df)  # same arguments, same rows

    cfg = OmegaConf.create({"filter_overlong_prompts": False, "max_prompt_length": 256, "cache_dir": str(tmp_path)})
    ds = RLHFDataset(data_files=[str(out)], tokenizer=tokenizer, config=cfg)
    assert len(ds) == 6
    item = ds[3]
    assert item["agent_name"] == "gymverse_agent" and item["raw_prompt"][0]["role"] == "user"
    assert EpisodeSpec.from_dict(item["extra_info"]) == core[3] == EpisodeSpec("logic:Nonogram", 6, None, "train", 1)


def test_make_dataset_rejects_bad_input(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from gymverse_verl.dataset import main

    assert main(["make-dataset", "--envs", "game:Nope", "--n", "2", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "game:Nope" in capsys.readouterr().err
    assert main(["make-dataset", "--envs", "game:GuessTheNumber", "--n", "0", "--out", str(tmp_path / "x.pq")]) == 2
    assert main(["make-dataset", "--envs", "game:GuessTheNumber", "--n", "1", "--complexity", "11", "--out", "y"]) == 2
    assert main(["make-dataset", "--envs", "game:GuessTheNumber", "--n", "1", "--split", "dev", "--out", "y"]) == 2


def test_import_verl_registered_everything() -> None:
    # conftest imported verl before any gymverse_verl module: the plugin module was loaded by verl itself
    eps = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    assert eps.get("gymverse") == "gymverse_verl.plugin"
    plugin = sys.modules["gymverse_verl.plugin"]
    assert all(plugin.REGISTERED.values()) and len(plugin.REGISTERED) == 3

    from gymverse_verl.advantage import compute_gymverse_perpo_advantage
    from gymverse_verl.agent_loop import GymVerseAgentLoop
    from gymverse_verl.trainer import GymVersePPOTrainer
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

    assert _agent_loop_registry["gymverse_agent"] == {"_target_": "gymverse_verl.agent_loop.GymVerseAgentLoop"}
    assert GymVerseAgentLoop.__module__ == "gymverse_verl.agent_loop"
    assert get_adv_estimator_fn("gymverse_perpo") is compute_gymverse_perpo_advantage
    assert get_trainer_cls("gymverse_sync") is GymVersePPOTrainer
    assert plugin.register_all() == plugin.REGISTERED  # idempotent


def test_check_split_names_the_wrong_rows() -> None:
    from gymverse_verl import AGENT_NAME
    from gymverse_verl.dataset import check_split, make_rows

    val = [(r["agent_name"], r["extra_info"]) for r in make_rows(["game:GuessTheNumber"], 2, split="val")]
    train = [(r["agent_name"], r["extra_info"]) for r in make_rows(["game:GuessTheNumber"], 2)]
    other = [("tool_agent", {"split": "train"})]  # rows of other agent loops are not GymVerse's to judge
    check_split(val + other, validation=True, files="v.parquet")
    check_split(train + other, validation=False, files="t.parquet")
    with pytest.raises(ValueError, match=r"val_files=v.parquet: 2 of 3 .*row 1, extra_info.split='train'.*--split val"):
        check_split([val[0], *train], validation=True, files="v.parquet")
    with pytest.raises(ValueError, match=r"val_files=v.parquet: 1 of 1 .*split=None"):
        check_split([(AGENT_NAME, {"env_id": "game:GuessTheNumber"})], validation=True, files="v.parquet")
    with pytest.raises(ValueError, match=r"train_files=t.parquet: 2 of 4 .*never move the curriculum"):
        check_split(train + val, validation=False, files="t.parquet")


@pytest.mark.usefixtures("ray_cluster")
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")  # torch, on verl's lazy imports
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # verl's 8 loader workers, 2 cores
def test_trainer_start_refuses_a_validation_set_without_split_val(kit: Any, tmp_path: Any) -> None:
    """``make-dataset`` without ``--split val`` for the validation file: verl's ``init()`` fails at its dataloader
    step, before any worker is started, naming the file and the fix."""
    import uuid

    from gymverse_verl.dataset import main
    from verl.trainer.ppo.v1 import get_trainer_cls

    for name in ("train", "val"):  # the mistake: both written as training rows
        out = f"{tmp_path}/{name}.parquet"
        assert main(["make-dataset", "--envs", "game:GuessTheNumber", "--n", "2", "--out", out]) == 0
    model = kit.model_folder("qwen3", tmp_path / "model")
    overrides = {
        "data.train_files": f"{tmp_path}/train.parquet",
        "data.val_files": f"{tmp_path}/val.parquet",
        "data.train_batch_size": 2,
        "actor_rollout_ref.model.path": model,
        "+gymverse.actor_name": f"cur-{uuid.uuid4().hex[:8]}",
    }
    trainer = get_trainer_cls("gymverse_sync")(kit.compose(kit.with_overrides(kit.readme_overrides(), overrides)))
    try:
        with pytest.raises(ValueError, match=r"data.val_files=.*val.parquet: 2 of 2 GymVerse rows.*--split val"):
            trainer.init()
        assert not hasattr(trainer, "actor_rollout_wg")  # failed before any GPU work
    finally:
        trainer._curriculum.stop()
