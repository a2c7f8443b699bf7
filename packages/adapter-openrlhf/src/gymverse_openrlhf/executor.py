"""`AgentExecutor` (``--train.agent_func_path``): one GymVerse episode per OpenRLHF sample through core's
`run_episode`, within ``--data.max_len`` (and ``--rollout.max_new_tokens`` per reply). The label is the row's
`EpisodeSpec`; it comes back with the episode's `EpisodeRecord` under ``"episode"``. A void episode
(`gymverse.failures`) is a two-token placeholder with no action range: nothing of it is trained."""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import Any

from gymverse.curriculum.service import CurriculumService
from gymverse.failures import GenerationError
from gymverse.pool import configure_shared_pool
from gymverse.registry import check_env_ids
from gymverse.rollout import Generation, open_session, renderer_for, run_episode
from gymverse.rollout.batch import EpisodeRecord
from gymverse.rollout.dataset import EpisodeSpec
from gymverse.trajectory import Trajectory
from openrlhf.utils.agent import AgentExecutorBase

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig

logger = logging.getLogger("gymverse_openrlhf")
LOG_KEYS = ("gymverse_env_index", "gymverse_complexity", "gymverse_success", "gymverse_turns", "gymverse_error")
REFUSALS = ("ValueError", "VLLMClientError", "EngineGenerateError")


def generator(llm_engine: Any, sampling_params: Any, finish: list[str]) -> Any:
    """``generate`` on `RolloutRayActor.generate`; vLLM refusing one request is a `GenerationError`."""

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        params = copy.deepcopy(sampling_params)
        params.max_tokens = max_tokens
        try:
            out = (await llm_engine.generate(prompt_ids, params)).outputs[0]
        except Exception as err:
            if not any(c.__name__ in REFUSALS for c in type(err).__mro__):
                raise
            raise GenerationError(f"{type(err).__name__}: {err}") from err
        finish.append(str(out.finish_reason))
        ids = [int(t) for t in out.token_ids]
        asked = sampling_params.logprobs is not None and ids
        if asked and out.logprobs is None:
            raise RuntimeError("the rollout engine returned no log-probs although SamplingParams.logprobs was set")
        lp = [float(d[t].logprob) for t, d in zip(ids, out.logprobs)] if asked else None
        return Generation(ids, lp, str(out.finish_reason))

    return generate


class AgentExecutor(AgentExecutorBase):
    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        row = json.loads(label) if isinstance(label, str) and label.lstrip().startswith("{") else label
        spec = EpisodeSpec.from_dict(row, hint="; write the dataset with `gymverse-openrlhf make-dataset`")
        check_env_ids([spec.env_id])
        cfg = GymVerseConfig.from_json(os.environ.get(ENV_VAR) or "{}")
        configure_shared_pool(cfg.pool_size)
        level, horizon, service = spec.complexity, cfg.curriculum.max_turns, None
        if cfg.curriculum.active:
            from gymverse_openrlhf.curriculum import get_service

            service = get_service()
            ec = await service.aepisode_config(spec.env_id, validation=spec.validation)
            level, horizon = (ec.complexity if ec.complexity is not None else level), ec.max_turns
        # the first prompt is OpenRLHF's own (the lab's template) while it holds the observation in effect
        renderer, given = renderer_for(hf_tokenizer), str(prompt)
        own, first = hf_tokenizer(given, add_special_tokens=False)["input_ids"], renderer.initial
        setattr(renderer, "initial", lambda obs: list(own) if obs in given else first(obs))  # noqa: B010
        finish: list[str] = []
        generate = generator(llm_engine, sampling_params, finish)
        kw = {"complexity": level, "max_sequence_tokens": max_length, "max_tokens_per_turn": sampling_params.max_tokens}
        async with await open_session(spec.env_id, seed=spec.seed) as session:
            traj = await run_episode(session, generate, renderer=renderer, horizon=horizon, seed=spec.seed, **kw)
        if traj.stop_reason == "length" and not traj.turns:
            raise ValueError(f"{spec.env_id} level {level}: the first prompt leaves no room within --data.max_len")
        await record(service, traj, spec)
        eos, logprobs = hf_tokenizer.eos_token_id or 0, sampling_params.logprobs is not None
        return response(traj, spec, prompt, images, eos=eos, logprobs=logprobs, truncated=finish[-1:] == ["length"])


async def record(service: CurriculumService | None, traj: Trajectory, spec: EpisodeSpec) -> None:
    """Record a training episode in the curriculum (it skips void ones) before dynamic filtering can drop it."""
    if service is not None and not spec.validation:
        await service.arecord([traj])


def response(
    traj: Trajectory, spec: EpisodeSpec, prompt: Any, images: Any = None, *, eos: int, logprobs: bool, truncated: bool
) -> dict[str, Any]:
    """OpenRLHF's executor dict for a finished episode."""
    tok, episode = traj.tokens, EpisodeRecord.of(traj)
    assert tok is not None
    if episode.trained:
        n = len(tok.prompt_ids)
        tokens, ranges = tok.prompt_ids + tok.response_ids, [(n + s, n + e) for s, e in tok.turn_spans()]
        lp = [0.0] * n + list(tok.response_logprobs) if logprobs and tok.response_logprobs is not None else None
        reward = float(sum(traj.rewards))
    else:
        logger.warning("GymVerse episode %s/%s void (%s): %s", spec.env_id, spec.seed, traj.stop_reason, traj.error)
        tokens, ranges, reward, lp, truncated = [eos, eos], [], 0.0, [0.0, 0.0] if logprobs else None, False
    values = (spec.env_index, traj.complexity, float(traj.success), len(traj.turns), float(episode.void))
    label = json.dumps({**spec.to_dict(), "episode": episode.to_dict()}, separators=(",", ":"))
    out = dict(prompt=prompt, label=label, images=images, mm_train_inputs=None, reward=reward, truncated=truncated)
    out.update(scores=float(traj.success), observation_tokens=tokens, action_ranges=ranges, rollout_log_probs=lp)
    return {**out, "extra_logs": dict(zip(LOG_KEYS, values))}
