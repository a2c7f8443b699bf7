"""The README's RL2 launch line on CPU: RL2's real config, the adapter's launch checks, rollout, PERPO hook and
RL2's own actor update with ``max_length_per_device`` (issue 30); and a hung env on the adapter's rollout path.

Only GPU pieces are stood in: the SGLang engine (a scripted ``async_generate`` answering in SGLang's format), the
flash-attention model (a tiny embedding LM), CUDA placement and FSDP offloading (`rl2_harness.cpu_actor`).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymverse.testing.vectest  # noqa: F401  (registers the vectest: envs)
import gymverse_rl2.episodes as episodes
import pytest
import torch
from gymverse.rollout import ByteTokenizer, EpisodeSpec
from gymverse.trajectory import Trajectory
from gymverse_rl2.patch import install, uninstall
from gymverse_rl2.settings import Settings
from gymverse_rl2.train import launch_settings, prepare
from rl2_harness import cpu_actor, cpu_rollout, rl2_config, sglang_reply


def readme_argv() -> list[str]:
    """The overrides of the README's ``torchrun ... -m gymverse_rl2.train`` launch line, as written."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    match = re.search(r"torchrun [^\n]*-m gymverse_rl2\.train \\\n(?:[^\n]*\\\n)*[^\n]*\n", text)
    assert match, "README has no gymverse_rl2.train launch line"
    words = match.group(0).replace("\\\n", " ").split()
    return words[words.index("gymverse_rl2.train") + 1 :]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()  # RL2 0.0.2 runs rollouts on `asyncio.get_event_loop()`
    asyncio.set_event_loop(loop)
    yield loop
    uninstall()
    asyncio.set_event_loop(None)
    loop.close()


def engine(reply: bytes) -> Any:
    """RL2's ``async_generate`` answered by a scripted engine: `reply` repeated up to ``max_new_tokens``."""

    async def async_generate(url: str, states: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        limit = sampling_params["max_new_tokens"]
        ids = list(reply * (limit // len(reply) + 1))[:limit] if reply.startswith(b"x") else list(reply)[:limit]
        return sglang_reply(ids, "length" if len(ids) == limit else "stop")

    return async_generate


def record_played(monkeypatch: pytest.MonkeyPatch) -> list[Trajectory]:
    """The trajectories the adapter's `play` returns, in order (RL2 itself keeps only its token record)."""
    played: list[Trajectory] = []
    real = episodes.play

    async def recording(*args: Any, **kwargs: Any) -> Trajectory:
        played.append(await real(*args, **kwargs))
        return played[-1]

    monkeypatch.setattr(episodes, "play", recording)
    return played


def test_readme_launch_line_runs_rl2_update_with_max_length_per_device(
    dist_group: None, loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import RL2.trainer.ppo as ppo
    import RL2.utils.sglang as sglang
    from RL2.datasets import state_dict_to_tensor_dict

    argv = readme_argv()
    settings, rest = prepare(argv)
    config = rl2_config(rest)  # RL2's ppo.yaml through Hydra, as RL2's main composes it
    settings = launch_settings(config, settings)
    assert settings.perpo and settings.curriculum.evolve and settings.curriculum.max_turns == 8
    assert settings.max_sequence_tokens == 8192 + 1  # RL2 drops a sequence's last token before packing
    assert settings.pool_size == 64 * 8  # every episode of a rollout batch has a session at once
    without = [a for a in rest if not a.startswith("actor.max_length_per_device=")]
    with pytest.raises(ValueError, match=r"actor\.max_length_per_device is null"):
        launch_settings(rl2_config(without), settings)  # the line as it was: refused at launch, not at update

    install(settings)
    monkeypatch.setattr(sglang, "async_generate", engine(b"x" * 64))  # long replies: the budget must bind
    rollout = cpu_rollout(config, ByteTokenizer(), monkeypatch)
    data = [{"extra_info": EpisodeSpec("vectest:Count", seed=i).to_dict()} for i in range(8)]  # one prompt x 8
    tensor_dict, cu_seqs = rollout(data, True, 1)
    ppo.compute_advantages(config.adv, tensor_dict, cu_seqs, 1)
    lengths = (tensor_dict["eos_mask"].argmax(-1) + 1).tolist()
    assert max(lengths) <= 8192 and min(lengths) > 8192 - 1100  # capped by the budget, not by turns

    actor = cpu_actor(config, monkeypatch)
    before = [p.detach().clone() for p in actor.model.parameters()]
    actor.update(tensor_dict, 1)  # RL2's own data_manager, minibatching, loss and optimizer step
    assert len(actor.model.calls) >= math.ceil(sum(lengths) / 8192)
    assert max(actor.model.calls) <= 8192
    assert any(not torch.equal(a, b) for a, b in zip(before, actor.model.parameters()))

    # what the budget prevents: one sequence past max_length_per_device crashes RL2's update
    long = state_dict_to_tensor_dict({k: [1] * 8194 for k in episodes.RL2_KEYS})
    batch = {k: v.unsqueeze(0) for k, v in long.items()}
    batch["advantages"] = torch.zeros_like(batch["action_mask"], dtype=torch.float32)
    with pytest.raises(AssertionError, match="exceeds the maximum length per dp"):
        actor.update(batch, 2)


def test_hung_env_ends_its_episode_within_the_default_step_timeout(
    dist_group: None, loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vectest:Hang`` blocks 60 s in a step; with default settings the episode ends ``env_error`` at the
    shared pool's default 30 s step timeout, void (action mask 0), on the adapter's real rollout path."""
    import RL2.utils.sglang as sglang

    overrides = [
        "train_data.prompts_per_rollout=1",
        "train_data.responses_per_prompt=2",
        "rollout.dynamic_filtering=false",
    ]
    config = rl2_config(["actor.model_name=unused", "actor.max_length_per_device=4096", *overrides])
    install(launch_settings(config, Settings()))
    monkeypatch.setattr(sglang, "async_generate", engine(b"\\boxed{1}"))
    played = record_played(monkeypatch)
    rollout = cpu_rollout(config, ByteTokenizer(), monkeypatch)
    data = [{"extra_info": EpisodeSpec("vectest:Hang", seed=i).to_dict()} for i in range(2)]
    start = time.monotonic()
    tensor_dict, _ = rollout(data, True, 1)
    elapsed = time.monotonic() - start
    assert elapsed < 40, elapsed  # 30 s step timeout plus the rollout's own work
    assert [t.stop_reason for t in played] == ["env_error", "env_error"]
    assert all("timed out" in (t.error or "") or "timeout" in (t.error or "").lower() for t in played), played
    assert int(tensor_dict["action_mask"].sum()) == 0


def test_sglang_abort_and_refusal_void_their_episodes(
    dist_group: None, loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SGLang's abort (``finish_reason.type == "abort"``, no tokens) and its refusal body (a prompt past the
    context length) end only their own episodes, void: action mask 0, nothing recorded by the curriculum."""
    import RL2.utils.sglang as sglang
    from gymverse.curriculum import CurriculumState
    from gymverse.curriculum.options import CurriculumOptions

    calls: list[int] = []

    async def failing(url: str, states: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        calls.append(len(states))
        if len(calls) % 2:
            return sglang_reply([], "abort")
        return {"error": {"message": f"The input ({len(states)} tokens) is longer than the model's context length"}}

    recorded: list[Any] = []
    end_step = CurriculumState.end_step

    def spy(self: CurriculumState) -> Any:
        recorded.extend(self._pending.values())
        return end_step(self)

    monkeypatch.setattr(CurriculumState, "end_step", spy)
    monkeypatch.setattr(sglang, "async_generate", failing)
    overrides = ["train_data.prompts_per_rollout=4", "rollout.dynamic_filtering=false"]
    config = rl2_config(["actor.model_name=unused", "actor.max_length_per_device=4096", *overrides])
    install(launch_settings(config, Settings(curriculum=CurriculumOptions(evolve=True))))
    played = record_played(monkeypatch)
    rollout = cpu_rollout(config, ByteTokenizer(), monkeypatch)
    tensor_dict, _ = rollout(
        [{"extra_info": EpisodeSpec("vectest:Count", seed=i).to_dict()} for i in range(4)], True, 1
    )
    assert sorted(t.stop_reason for t in played) == ["generation_aborted"] * 2 + ["generation_error"] * 2
    assert all("context length" in (t.error or "") for t in played if t.stop_reason == "generation_error")
    assert int(tensor_dict["action_mask"].sum()) == 0 and recorded == []
