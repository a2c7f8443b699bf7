"""The suites through the CLI: `gymverse list` shows the installed ones, `gymverse check` passes, `gymverse train`
trains on a reasoning-gym task for a few steps (a tiny random model: the test is about the pipeline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gymverse.checker import check_env
from gymverse.cli import main
from gymverse_suites import installed_suites


def test_gymverse_list_shows_the_installed_suites(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    families = {s.family for s in installed_suites()}
    assert {"rg", "babyai", "textcraft", "sciworld"} <= families  # the dev environment installs these extras
    for family in families:
        assert f"{family}:" in out
    assert "textworld:" not in out  # not installed here: not listed


@pytest.mark.parametrize("env_id", ["rg:chain_sum", "gem-game:Mastermind", "babyai:BabyAI", "textcraft:TextCraft"])
def test_checker_passes_levels_1_and_10(env_id: str) -> None:
    if env_id.startswith("gem-game:"):
        pytest.importorskip("gem")  # not in the dev environment (see the root pyproject's dev group)
    report = check_env(env_id, levels=(1, 10), seeds=(0,))
    assert report.passed, report.summary()


def test_gymverse_train_on_a_reasoning_gym_task(tmp_path: Path) -> None:
    pytest.importorskip("gymverse_train")
    torch = pytest.importorskip("torch")
    from gymverse.testing import random_causal_lm, tiny_tokenizer

    torch.set_num_threads(1)
    tokenizer = tiny_tokenizer(["Give your final answer inside \\boxed{...}. Calculate 1 + 2 = 3"] * 8, "smollm2")
    model_dir = tmp_path / "tiny"
    random_causal_lm(tokenizer, seed=0, max_position_embeddings=1024).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    out = tmp_path / "run"
    argv = ["train", "--model", str(model_dir), "--envs", "rg:chain_sum", "--steps", "2"]
    argv += ["--prompts", "1", "--group-size", "2", "--max-turns", "2", "--max-new-tokens", "6", "--evolve"]
    assert main([*argv, "--threads", "1", "--out", str(out)]) == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert set(metrics[-1]["complexity_by_env"]) == {"rg:chain_sum"}


def test_suite_ids_in_the_shared_dataset_rows() -> None:
    from gymverse.rollout.dataset import episode_specs

    ids = [
        "rg:chain_sum",
        "sciworld:1-1",
        "babyai:BabyAI",
        "textcraft:TextCraft",
        "agentgym+http://127.0.0.1:9/agentgym/x:Y",
    ]
    rows = episode_specs(ids, 2, seed=10)  # the rows every adapter's make-dataset writes
    assert [(r.env_id, r.seed) for r in rows[:5]] == [(i, 10) for i in ids] and rows[-1].seed == 11
