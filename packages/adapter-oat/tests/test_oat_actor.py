"""The actor's real collection path (oat's `ActorBase.init` with the vLLM stand-in, our `collect_experience`):
a hung env ends its episode at the shared pool's default step timeout, void; a prompt past ``--max_model_len``
is a per-episode `GenerationError`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymverse.testing.vectest  # noqa: F401  (registers the vectest: envs)
import pytest
from gymverse.failures import GenerationError
from gymverse.pool import DEFAULT_STEP_TIMEOUT, shared_pool
from gymverse_oat.actor import GymVerseActor
from gymverse_oat.cli import parse_args


@pytest.fixture
def actors() -> Iterator[list[GymVerseActor]]:
    """Actors made by a test, closed after it (event loop, env pool, the engine stand-in's one-process torch world)."""
    import torch.distributed as dist

    made: list[GymVerseActor] = []
    yield made
    for actor in made:
        actor._loop.close()
    shared_pool().close()  # its threads would not exist in the node processes later tests fork from this one
    if dist.is_initialized():
        dist.destroy_process_group()


def make_actor(model: Path, monkeypatch: pytest.MonkeyPatch, made: list[GymVerseActor], *flags: str) -> GymVerseActor:
    import oat.actors.base

    monkeypatch.setattr(oat.actors.base, "PlasmaShmClient", lambda server: None)  # oat's transport: unused here
    base = ["--gpus", "1", "--rollout_batch_size_per_device", "2", "--rollout_batch_size", "2", "--num_env", "2"]
    args: Any = parse_args([*base, "--pretrain", str(model), *flags])
    actor = GymVerseActor(None, {"model": str(model), "max_model_len": args.max_model_len}, args)
    actor.init(0, str(model))
    made.append(actor)
    return actor


def test_hung_env_ends_its_episode_within_the_default_step_timeout(
    policy_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actors: list[GymVerseActor]
) -> None:
    """``vectest:Hang`` blocks 60 s in a step: with default settings its episode ends ``env_error`` after the
    default 30 s step timeout, is void (no transition reaches the learner) and the batch goes on."""
    model = policy_model(tmp_path / "model", "guess_binary")
    flags = ("--env_id", "vectest:Hang|vectest:Count", "--env_mix", "round_robin", "--max_turns", "4")
    actor = make_actor(model, monkeypatch, actors, *flags)
    start = time.monotonic()
    episodes, info = actor.collect_experience()
    elapsed = time.monotonic() - start
    assert DEFAULT_STEP_TIMEOUT == 30.0 and elapsed < 40, elapsed
    assert info["actor/gymverse_void_episodes"] == 1.0
    assert {t.env_id for ep in episodes for t in ep} == {"vectest:Count"}


def test_prompt_past_max_model_len_is_a_generation_error(
    policy_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actors: list[GymVerseActor]
) -> None:
    model = policy_model(tmp_path / "model", "guess_binary")
    actor = make_actor(model, monkeypatch, actors, "--env_id", "vectest:Count", "--max_model_len", "64")
    with pytest.raises(ValueError, match="longer than the maximum model length of 64"):  # the engine: whole call
        actor.generate([[1] * 64], actor.sampling_params)
    with pytest.raises(GenerationError, match="--max_model_len 64"):  # the adapter: this episode only
        asyncio.run(actor._generate([1] * 64, None))
    episodes, _ = actor.collect_experience()  # the budget keeps every episode inside the engine's context
    assert all(len(t.prompt_ids) + len(t.response_ids) <= 64 for ep in episodes for t in ep)
