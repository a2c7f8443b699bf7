"""The CLI: the agent file OpenRLHF loads, and the prompt dataset read through OpenRLHF's own PromptDataset."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import gymverse
import pytest
from gymverse.rollout.dataset import EpisodeSpec, episode_specs
from gymverse_openrlhf.cli import agent_path, main
from gymverse_openrlhf.executor import AgentExecutor
from openrlhf.datasets.prompts_dataset import PromptDataset
from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
from openrlhf.utils.agent import AgentExecutorBase


def test_openrlhf_loads_the_shipped_agent_file(capsys: Any) -> None:
    assert main(["agent-path"]) == 0
    path = capsys.readouterr().out.strip()
    assert path == agent_path()
    executor = _load_agent_executor(path)  # OpenRLHF's own loader for --train.agent_func_path
    assert isinstance(executor, AgentExecutorBase)
    assert type(executor) is AgentExecutor  # the file re-exports the package's executor


def test_make_dataset_rows_read_by_openrlhf_prompt_dataset(tmp_path: Any, tokenizer: Any, capsys: Any) -> None:
    out = tmp_path / "prompts.jsonl"
    envs = ["game:GuessTheNumber", "logic:Nonogram"]
    assert main(["make-dataset", "--envs", ",".join(envs), "--n", "3", "--out", str(out), "--seed", "5"]) == 0
    assert "--data.input_key prompt --data.label_key label" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6
    labels = [EpisodeSpec.from_dict(json.loads(r["label"])) for r in rows]
    assert labels == episode_specs(envs, 3, seed=5)  # core's one row schema and seed scheme
    assert [(lb.env_id, lb.seed, lb.env_index) for lb in labels] == [(envs[i % 2], 5 + i // 2, i % 2) for i in range(6)]
    for row, lb in zip(rows, labels):
        assert row["prompt"] == gymverse.make(lb.env_id).reset(seed=lb.seed)[0]
    # the documented flags: --data.input_key prompt --data.label_key label --data.apply_chat_template
    data = SimpleNamespace(input_key="prompt", label_key="label", apply_chat_template=True, image_key="images")
    strategy = SimpleNamespace(args=SimpleNamespace(data=data), is_rank_0=lambda: False)
    ds = PromptDataset(rows, tokenizer, strategy)
    _, prompt, label, _ = ds[1]
    assert label == rows[1]["label"]
    assert prompt == tokenizer.apply_chat_template(
        [{"role": "user", "content": rows[1]["prompt"]}], tokenize=False, add_generation_prompt=True
    )
    # same arguments, same file
    again = tmp_path / "again.jsonl"
    main(["make-dataset", "--envs", ",".join(envs), "--n", "3", "--out", str(again), "--seed", "5"])
    assert again.read_text() == out.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--envs", "game:Nope", "--n", "1"], "unknown env id(s) ['game:Nope']"),
        (["--envs", "game:GuessTheNumber", "--n", "0"], "--n must be >= 1"),
        (["--envs", "game:GuessTheNumber,game:GuessTheNumber", "--n", "1"], "env ids repeat"),
        (["--envs", "game:GuessTheNumber", "--n", "1", "--split", "test"], "split must be one of"),
    ],
)
def test_make_dataset_rejects_bad_input(tmp_path: Any, capsys: Any, args: Any, message: Any) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["make-dataset", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gymverse-openrlhf: error: ") and message in err
    assert not out.exists()
