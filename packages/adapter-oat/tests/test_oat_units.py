"""The adapter's pieces in isolation: the core's generation batching as the actor uses it, flag validation and
refusals, curriculum options, and vLLM's failure shapes (abort, no log-probs, context length)."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

import pytest
from gymverse.curriculum import CurriculumState
from gymverse.rollout import BatchedGenerate, Generation
from gymverse_oat.cli import main, parse_args
from gymverse_oat.episodes import generations_from_vllm


async def _episodes(gen: BatchedGenerate, turns: list[int]) -> list[list[int]]:
    async def episode(i: int, n: int) -> list[int]:
        got = []
        try:
            for t in range(n):
                await asyncio.sleep(0.001 * (i + 1))  # envs answer at different speeds
                got.append(len((await gen([i, t], 8)).token_ids))
        finally:
            gen.episode_finished()
        return got

    for _ in turns:
        gen.episode_started()
    return list(await asyncio.gather(*(episode(i, n) for i, n in enumerate(turns))))


def test_generations_of_concurrent_episodes_go_out_as_one_engine_call_per_round() -> None:
    batches: list[int] = []

    def engine(prompts: list[list[int]], caps: list[int | None]) -> list[Generation]:
        batches.append(len(prompts))
        return [Generation(list(range(p[0] + 1)), [0.0] * (p[0] + 1)) for p in prompts]

    gen = BatchedGenerate(engine)
    out = asyncio.run(_episodes(gen, [3, 1, 2]))
    assert out == [[1, 1, 1], [2], [3, 3]]  # every episode got its own prompt's generation
    assert batches == [3, 2, 1] and gen.calls == 3  # rounds shrink as episodes finish; never one call per prompt


def test_a_failing_engine_fails_every_waiting_episode() -> None:
    def engine(prompts: list[list[int]], caps: list[int | None]) -> list[Generation]:
        raise ConnectionError("engine died")

    with pytest.raises(ConnectionError, match="engine died"):
        asyncio.run(_episodes(BatchedGenerate(engine), [2, 2]))


def test_an_engine_returning_too_few_generations_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="1 generations for 2 prompts"):
        asyncio.run(_episodes(BatchedGenerate(lambda p, c: [Generation([1], [0.0])]), [1, 1]))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--env_id", " | "], "names no environment"),
        (["--env_id", "game:GuessTheNumber|game:GuessTheNumber"], "lists an environment twice"),
        (["--env_id", "a|b", "--env_weights", "1"], "has 1 entries for 2 environments"),
    ],
)
def test_bad_environment_flags_are_named(flags: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_args([*flags, "--gpus", "1", "--rollout_batch_size", "16"])


def test_weighted_mixing_needs_weights_and_builds_the_core_mixer() -> None:
    flags = ["--env_id", "a|b", "--env_mix", "weighted", "--gpus", "1", "--rollout_batch_size", "16"]
    with pytest.raises(ValueError, match="needs --env_weights"):
        parse_args(flags)
    args = parse_args([*flags, "--env_weights", "3|1"])
    state = CurriculumState.from_config(args.curriculum_config())
    draws = state.sample_envs(400)
    assert 0.65 < draws.count("a") / 400 < 0.85


def test_flags_are_the_core_curriculum_options() -> None:
    """One name per knob (the core's `CurriculumOptions`); the reference's --evolve --gamma --norm_return work."""
    flags = ["--env_id", "a|b", "--evolve", "--patience", "2", "--horizon", "4,8", "--horizon_interval", "5"]
    flags += ["--gamma", "0.9", "--norm_return", "--initial_level", "3", "--eval_level", "2"]
    args = parse_args([*flags, "--gpus", "1", "--rollout_batch_size", "16"])
    assert args.evolve and args.gamma == 0.9 and args.norm_return
    config = args.curriculum_config()
    assert config["controller"]["promote_patience"] == 2 and config["horizon"]["rounds"] == [4, 8]
    state = CurriculumState.from_config(config)
    assert state.episode_config("a").complexity == 3 and state.episode_config("a").max_turns == 4
    assert state.episode_config("a", validation=True).complexity == 2
    with pytest.raises(ValueError, match="horizon must be"):
        parse_args(["--horizon", "4,x", "--gpus", "1", "--rollout_batch_size", "16"])
    with pytest.raises(SystemExit):  # the old adapter-specific spelling is gone
        parse_args(["--evolve_patience", "2", "--gpus", "1"])


def test_rollout_batch_size_is_kept_or_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's --rollout_batch_size 128 stays 128 at --gpus 4 (oat then learns every 2 collections)."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)  # oat's validation counts GPUs
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = re.search(r"gymverse-oat \\\n(?:[^\n]*\\\n)*[^\n]*\n", readme)
    assert block, "README has no gymverse-oat launch line"
    line = shlex.split(block.group(0).replace("\\\n", " "))[1:]
    args = parse_args(line)  # the README's line as written
    assert (args.gpus, args.rollout_batch_size, args.rollout_batch_size_per_device) == (4, 128, 16)
    assert args.evolve and args.gamma == 0.9 and args.norm_return
    flags = ["--rollout_batch_size_per_device", "16", "--pretrain", "m"]
    assert parse_args([*flags, "--gpus", "1", "--rollout_batch_size", "48"]).rollout_batch_size == 48
    with pytest.raises(SystemExit, match=r"--rollout_batch_size 100 must be a multiple of .* = 64"):
        main([*flags, "--gpus", "4", "--rollout_batch_size", "100"])
    with pytest.raises(SystemExit, match=r"--asynchronous is not supported"):
        main([*flags, "--gpus", "1", "--rollout_batch_size", "16", "--asynchronous"])


def test_vllm_abort_and_missing_logprobs() -> None:
    """vLLM returns log-probs only when asked, and an aborted request with no tokens."""
    from vllm import CompletionOutput, Logprob, RequestOutput

    done = CompletionOutput(0, "hi", [5, 6], None, [{5: Logprob(-0.1)}, {6: Logprob(-0.2)}], "stop")
    unasked = CompletionOutput(0, "hi", [5, 6], None, None, "length")
    aborted = CompletionOutput(0, "", [], None, None, "abort")
    gens = generations_from_vllm(
        [RequestOutput(str(i), None, [1], [c]) for i, c in enumerate([done, unasked, aborted])]
    )
    assert [list(g.token_ids) for g in gens] == [[5, 6], [5, 6], []]
    assert gens[0].logprobs == [-0.1, -0.2] and gens[1].logprobs is None
    assert not gens[0].aborted and gens[2].aborted and gens[1].finish_reason == "length"
