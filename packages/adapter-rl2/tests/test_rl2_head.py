"""RL2 head's env-file contract (``generate(config, tokenizer, router_url, sample)``) with GymVerse episodes.

The released rl-square 0.0.2 lacks this API, so `rl2_head_model` mirrors the head's `Sample`/`SampleGroup`
(RL2@9161ede). The SGLang stand-in server is started by RL2's own ``launch_server_process``; the env file is
loaded the way RL2 loads ``rollout.env_path`` (``importlib`` ``spec_from_file_location``).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from gymverse.curriculum.options import CurriculumOptions
from gymverse.failures import GenerationError
from gymverse.rollout import EpisodeRecord, episode_specs
from gymverse_rl2 import settings as runtime
from gymverse_rl2.episodes import generation_of, spec_of
from gymverse_rl2.patch import _wrap_tensor_dicts, perpo_advantages
from gymverse_rl2.settings import RECORD_TAG, Settings
from gymverse_rl2.train import env_path
from rl2_harness import stop_children
from rl2_head_model import Sample, SampleGroup, install_communication_module

ENVS = ["game:GuessTheNumber", "game:LightsOut"]


def load_env_file() -> ModuleType:
    """What RL2's `Rollout._prepare_environment` does with ``rollout.env_path``."""
    spec = importlib.util.spec_from_file_location("custom_module", env_path())
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(tokenizer_dir: Path, dist_group: None) -> Iterator[str]:
    from omegaconf import OmegaConf
    from RL2.utils.sglang import launch_server_process

    install_communication_module()
    args = {"model_path": str(tokenizer_dir), "dtype": "bfloat16", "tp_size": 1, "mem_fraction_static": 0.6}
    try:
        yield launch_server_process(OmegaConf.create(args))
    finally:
        stop_children()


def play_groups(url: str, tokenizer_dir: Path, settings: Settings) -> list[SampleGroup]:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    runtime.configure(settings)
    env = load_env_file()
    config = OmegaConf.create(
        {"responses_per_prompt": 2, "sampling_params": {"temperature": 1.0, "max_new_tokens": 48, "stop": None}}
    )
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    groups = [
        SampleGroup(config, tokenizer, row)
        for row in [{"extra_info": s.to_dict()} for s in episode_specs(ENVS, 2, seed=5)]
    ]

    async def run() -> None:
        await asyncio.gather(*(g.generate(url, env.generate) for g in groups))

    asyncio.run(run())
    return groups


def test_head_generate_fills_rl2_samples(server: str, tokenizer_dir: Path) -> None:
    groups = play_groups(server, tokenizer_dir, Settings(curriculum=CurriculumOptions(max_turns=5)))
    for group in groups:
        for sample in group.samples:
            assert sample.status is Sample.Status.DONE
            info = EpisodeRecord.from_dict(sample.sample["gymverse"]).to_dict()  # the core record, unchanged
            assert info["env_id"] == sample.sample["extra_info"]["env_id"] and len(info["turn_ends"]) == sample.turn
            record = sample.state_dicts[0]
            assert len({len(v) for v in record.values()}) == 1
            assert sample.state_text + sample.action_text == group.tokenizer.decode(record["states"])
            assert sum(record["rewards"]) == pytest.approx(sum(info["turn_rewards"]))
            assert sum(record["action_mask"]) == sum(sample.metrics["response_length"])
            if info["env_id"] == ENVS[0]:  # the policy thinks here: each reply's <think> block stays in the
                # trained tokens (Qwen3's template drops earlier ones when it re-renders a conversation)
                assert group.tokenizer.decode(record["states"]).count("<think>") == sample.turn
            assert record["action_mask"][-1] == 1 or info["stop_reason"] != "terminated"
        guess = [s for s in group.samples if s.sample["gymverse"]["env_id"] == ENVS[0]]
        assert all(s.sample["gymverse"]["success"] for s in guess)


def test_head_batches_carry_env_ids_for_perpo(server: str, tokenizer_dir: Path) -> None:
    from RL2.datasets.base import pack_tensor_dicts

    groups = play_groups(server, tokenizer_dir, Settings(perpo=True, curriculum=CurriculumOptions(max_turns=5)))
    tagged = _wrap_tensor_dicts(SampleGroup.to_all_tensor_dicts_and_metrics)
    all_tensor_dicts: list[list[dict[str, torch.Tensor]]] = []
    for group in groups:
        tds, metrics = tagged(group)
        assert set(metrics) >= {"response_length", "n_turns", "scores"}
        all_tensor_dicts.extend(tds)
    batch = pack_tensor_dicts([td for tds in all_tensor_dicts for td in tds])
    cu_seqs = torch.cumsum(torch.tensor([0] + [len(t) for t in all_tensor_dicts]), 0)
    rt = runtime.current()
    keys = batch.pop(RECORD_TAG)
    records = [rt.records[int(keys[int(a), 0])] for a in cu_seqs[:-1]]
    env_ids = [r.env_id for r in records]
    assert env_ids == [s.sample["extra_info"]["env_id"] for g in groups for s in g.samples]
    adv = perpo_advantages(batch, cu_seqs, records)
    assert adv.shape == batch["action_mask"].shape
    assert torch.all(adv[batch["action_mask"] == 0] == 0)
    of_env = {env: [i for i, e in enumerate(env_ids) if e == env] for env in ENVS}
    # every GuessTheNumber episode succeeds: with gamma 1 each turn's return is 1, so its env-normalized
    # advantage is 0 (RL2's own grouping would say the same here); LightsOut's returns differ turn by turn
    assert torch.all(adv[of_env[ENVS[0]]] == 0)
    assert adv[of_env[ENVS[1]]].abs().sum() > 0


def test_env_file_refuses_rl2_0_0_2_loop_with_launch_line() -> None:
    env = load_env_file()
    with pytest.raises(RuntimeError, match=r"python -m gymverse_rl2\.train"):
        asyncio.run(env.reset({"env_id": ENVS[0], "seed": 0}))


def test_sglang_abort_error_and_bad_rows() -> None:
    """SGLang's abort (no tokens) is an aborted Generation; its error body (context length) a GenerationError."""
    meta: dict[str, Any] = {"output_token_logprobs": [], "finish_reason": {"type": "abort"}}
    gen = generation_of({"text": "", "meta_info": meta})
    assert gen.aborted and list(gen.token_ids) == []
    assert generation_of({"text": "", "meta_info": {"finish_reason": {"type": "abort"}}}).aborted
    too_long = {"error": {"message": "The input (40000 tokens) is longer than the model's context length (32768)"}}
    with pytest.raises(GenerationError, match="context length"):
        generation_of(too_long)
    with pytest.raises(GenerationError, match="refused"):  # any reply without meta_info refuses this request
        generation_of({"text": "hi"})
    assert list(generation_of({"meta_info": {"finish_reason": {"type": "stop"}}}).token_ids) == []  # empty: void
    with pytest.raises(ValueError, match="make-dataset"):
        spec_of({"prompt": "hello"})
    with pytest.raises(ValueError, match="seed must be an integer"):
        spec_of({"extra_info": {"env_id": ENVS[0], "seed": "7"}})
    with pytest.raises(ValueError):
        spec_of({"extra_info": {"env_id": ENVS[0], "seed": 1, "complexity": 11}})
