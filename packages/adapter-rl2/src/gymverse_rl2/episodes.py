"""One RL2 sample = one GymVerse episode (`run_episode`, RL2's SGLang router generating) as RL2's token record; a
void episode keeps its row with action mask 0. RL2 0.0.2: `rollout` replaces ``Rollout.rollout`` (its own loop
re-tokenizes text); RL2 head (@9161ede): the env file's `generate`, record in ``sample.sample["gymverse"]``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from gymverse.failures import GenerationError, is_trained
from gymverse.rollout import EpisodeRecord, EpisodeSpec, Generation, open_session, renderer_for, run_episode
from gymverse.trajectory import Trajectory

from gymverse_rl2.settings import RECORD_TAG, current, training

Post = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]]  # RL2's request helper, bound to the router
RL2_KEYS = ("states", "actions", "action_mask", "logps", "rewards")


def spec_of(row: Mapping[str, Any]) -> EpisodeSpec:
    """The episode a dataset row names (its ``extra_info``); a malformed row raises a ValueError naming it."""
    return EpisodeSpec.from_dict(row.get("extra_info"), hint="; write the dataset with `gymverse-rl2 make-dataset`")


def generation_of(response: Mapping[str, Any]) -> Generation:
    """The reply in an SGLang response; a refusal (``error`` body: context length...) raises `GenerationError`."""
    meta = response.get("meta_info")
    if not isinstance(meta, Mapping):
        raise GenerationError(f"SGLang refused the request: {response.get('error') or dict(response)!r:.300}")
    finish = meta.get("finish_reason") or {}
    entries = meta.get("output_token_logprobs") or []
    reason = str(finish.get("type") if isinstance(finish, Mapping) else finish)
    return Generation([int(e[1]) for e in entries], [float(e[0]) for e in entries], reason)


async def play(spec: EpisodeSpec, tokenizer: Any, post: Post, params: Mapping[str, Any], train: bool) -> Trajectory:
    """One episode (curriculum level and turn cap, RL2's limits as budget), recorded before RL2 filters anything."""
    rt = current()
    train = train and not spec.validation
    conf = await rt.curriculum.aepisode_config(spec.env_id, validation=not train)

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        caps = [c for c in (params.get("max_new_tokens"), max_tokens) if c is not None]
        sampling = {**params, "max_new_tokens": min(caps) if caps else None, "no_stop_trim": True}
        return generation_of(await post({"input_ids": prompt_ids, "sampling_params": sampling, "return_logprob": True}))

    session = await open_session(spec.env_id)
    try:
        traj = await run_episode(
            session,
            generate,
            renderer=renderer_for(tokenizer, system_prompt=rt.settings.system_prompt),
            horizon=conf.max_turns,
            seed=spec.seed,
            complexity=conf.complexity if conf.complexity is not None else spec.complexity,
            max_response_tokens=rt.settings.max_response_tokens,
            max_sequence_tokens=rt.settings.max_sequence_tokens,
        )
    finally:
        await session.close()
    if train:
        await rt.curriculum.arecord([traj])  # the curriculum leaves void episodes out itself
    return traj


def state_dict_of(traj: Trajectory) -> dict[str, list[Any]]:
    """RL2's record of an episode: rewards on each turn's last token, action mask 0 if void, cut to the budget."""
    tokens = traj.tokens
    if tokens is None:
        raise ValueError(f"{traj.env_id}: trajectory has no tokens (not from gymverse.rollout.run_episode)")
    n = len(tokens.prompt_ids)
    states = [*tokens.prompt_ids, *tokens.response_ids]
    trained = is_trained(traj.stop_reason or "terminated")  # once per episode, not per token
    mask = [0] * n + ([int(m) for m in tokens.response_mask] if trained else [0] * len(tokens.response_mask))
    rewards = [0.0] * len(states)
    for turn, end in zip(traj.turns, tokens.turn_ends):
        rewards[n + end - 1] += float(turn.reward)
    logps = [0.0] * n + [float(x) for x in tokens.response_logprobs or [0.0] * len(tokens.response_ids)]
    values: tuple[list[Any], ...] = (states, [s if m else 0 for s, m in zip(states, mask)], mask, logps, rewards)
    return {k: v[: current().settings.max_sequence_tokens or len(states)] for k, v in zip(RL2_KEYS, values)}


def metrics_of(traj: Trajectory) -> dict[str, list[Any]]:
    """RL2's rollout metrics of one episode (``response_length`` per model turn)."""
    lengths = [b - a for a, b in traj.tokens.turn_spans()] if traj.tokens is not None else []
    return {
        "response_length": lengths or [0],  # never empty: RL2 averages each metric over the batch
        "length_clip_ratio": [traj.stop_reason == "length"],
        "n_turns": [len(traj.turns)],
        "scores": [traj.total_reward],
        "success": [bool(traj.success)],
        "complexity": [traj.complexity],
    }


async def rollout(self: Any, data: dict[str, Any], train: bool) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """RL2 0.0.2: replacement for ``RL2.workers.rollout.Rollout.rollout`` (same arguments and return value)."""
    import torch
    from RL2.datasets import state_dict_to_tensor_dict
    from RL2.utils.sglang import async_generate

    async def post(payload: dict[str, Any]) -> Any:
        return await async_generate(self.router_url, payload["input_ids"], payload["sampling_params"])

    params = self.train_sampling_params if train else self.test_sampling_params
    traj = await play(spec_of(data), self.tokenizer, post, params, train)
    tensor_dict = state_dict_to_tensor_dict(state_dict_of(traj))
    tensor_dict[RECORD_TAG] = torch.full_like(tensor_dict["states"], current().add(EpisodeRecord.of(traj)))
    return [tensor_dict], metrics_of(traj)


async def generate(config: Any, tokenizer: Any, router_url: str, sample: Any) -> None:
    """RL2 head: play the episode named by ``sample.sample`` and store it on `sample` the way RL2 does."""
    if str(getattr(sample.status, "value", sample.status)) == "done":
        return
    from omegaconf import OmegaConf
    from RL2.utils.communication import async_request

    async def post(payload: dict[str, Any]) -> Any:
        return await async_request(router_url, "generate", json=payload)

    params: Any = OmegaConf.to_container(config.sampling_params, resolve=True)
    traj = await play(spec_of(sample.sample), tokenizer, post, params, training.get())
    record = state_dict_of(traj)
    assert traj.tokens is not None  # state_dict_of checked it
    sample.state_text = tokenizer.decode(traj.tokens.prompt_ids)
    sample.action_text = tokenizer.decode(traj.tokens.response_ids)
    sample.state_dict, sample.state_dicts, sample.turn = record, [record], len(traj.turns)
    for key, values in metrics_of(traj).items():
        sample.metrics[key].extend(values)
    sample.sample["gymverse"] = EpisodeRecord.of(traj).to_dict()
    sample.status = type(sample.status)("done")
