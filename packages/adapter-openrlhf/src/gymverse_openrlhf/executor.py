"""`AgentExecutor`: what ``--train.agent_func_path`` loads; one GymVerse episode per OpenRLHF sample.

A translation onto GymVerse's one episode pipeline: the label is the row's `EpisodeSpec` (level: the curriculum's
when one runs); OpenRLHF's rollout engine becomes the episode's ``generate`` (a request vLLM rejects, e.g. a prompt
past its context length, or fails is a `GenerationError`; an aborted one is ``finish_reason="abort"``);
`gymverse.rollout.run_episode` plays it on a session from the process-wide pool (sized from OpenRLHF's batch
settings, core's default step and reset timeouts) within OpenRLHF's ``max_length`` (``--data.max_len``), each
reply within ``--rollout.max_new_tokens``. The first prompt is OpenRLHF's own (the lab's template), with the
observation in effect swapped in when the level moved since the dataset was written; env turns come from
`gymverse.rollout.renderer_for` around the model's ids. The result is OpenRLHF's executor dict: the tokens, one
action range per reply (`EpisodeTokens.turn_spans`), the episode return, ``scores`` = success, numeric
``extra_logs`` and the label with the episode's `EpisodeRecord` under ``"episode"``. A void episode
(`gymverse.failures`: reset, env or generation failure) is a two-token placeholder with no action range, so
OpenRLHF's action mask is 0 on it: nothing is generated for it and nothing of it is trained.
"""

from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from gymverse.curriculum.service import CurriculumService
from gymverse.failures import GenerationError
from gymverse.registry import check_env_ids
from gymverse.rollout import Generation, Renderer, open_session, renderer_for, run_episode
from gymverse.rollout.batch import EpisodeRecord
from gymverse.rollout.dataset import EpisodeSpec
from gymverse.trajectory import Trajectory
from gymverse.vector import configure_shared_pool
from openrlhf.utils.agent import AgentExecutorBase

from gymverse_openrlhf.cli import initial_observation
from gymverse_openrlhf.config import GymVerseConfig

logger = logging.getLogger("gymverse_openrlhf")
#: Keys of ``extra_logs`` (always all present: OpenRLHF batches logs key by key).
LOG_KEYS = ("gymverse_env_index", "gymverse_complexity", "gymverse_success", "gymverse_turns", "gymverse_error")
#: vLLM's exceptions for one request it rejects (`ValueError`: its validation, e.g. context length) or fails
#: (`EngineGenerateError`); anything else (`EngineDeadError`, a dead actor) fails the rollout.
REFUSALS = ("ValueError", "VLLMClientError", "EngineGenerateError")


def read_label(label: Any) -> EpisodeSpec:
    """The row's `EpisodeSpec` from OpenRLHF's label (a JSON string or a dict)."""
    hint = "; build the dataset with `gymverse-openrlhf make-dataset` and pass --data.label_key label"
    try:
        data = json.loads(label) if isinstance(label, str) else label
    except json.JSONDecodeError as err:
        raise ValueError(f"GymVerse label is not JSON ({err}): {label[:120]!r}{hint}") from None
    return EpisodeSpec.from_dict(data, hint=hint)


class DatasetPrompt:
    """A renderer whose first prompt is OpenRLHF's own; env turns, actions and decoding are `base`'s."""

    def __init__(self, base: Renderer, tokenizer: Any, given: str, spec: EpisodeSpec) -> None:
        self.base, self.tokenizer, self.given, self.spec = base, tokenizer, given, spec

    def initial(self, observation: str) -> list[int]:
        """OpenRLHF's prompt, holding the observation in effect (swapped in if the dataset's is stale)."""
        text: str | None = self.given
        if observation not in self.given:
            try:
                stale = initial_observation(self.spec.env_id, self.spec.seed, self.spec.complexity)
            except Exception:  # cannot even reset: render the observation itself
                stale = ""
            text = self.given.replace(stale, observation) if stale and stale in self.given else None
        if text is None:
            return self.base.initial(observation)
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def env_turn(self, observation: str, reply_ids: Sequence[int]) -> list[int]:
        return self.base.env_turn(observation, reply_ids)

    def action_text(self, reply_ids: Sequence[int]) -> str:
        return self.base.action_text(reply_ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self.base.decode(ids)


def generator(llm_engine: Any, sampling_params: Any, finish: list[str]) -> Any:
    """The episode's ``generate`` on OpenRLHF's engine (`RolloutRayActor.generate`: vLLM's final output)."""

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
        if sampling_params.logprobs is None or not ids:
            return Generation(ids, None, str(out.finish_reason))
        if out.logprobs is None:
            raise RuntimeError("the rollout engine returned no log-probs although SamplingParams.logprobs was set")
        return Generation(ids, [float(d[t].logprob) for t, d in zip(ids, out.logprobs)], str(out.finish_reason))

    return generate


class AgentExecutor(AgentExecutorBase):
    """OpenRLHF's agent-executor interface over `gymverse.rollout.run_episode` (see the module docstring)."""

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
        """Run one episode and return OpenRLHF's response dict."""
        spec = read_label(label)
        check_env_ids([spec.env_id])
        cfg = GymVerseConfig.from_env()
        configure_shared_pool(cfg.pool_size)
        level, horizon, service = spec.complexity, cfg.curriculum.max_turns, None
        if cfg.curriculum.active:
            from gymverse_openrlhf.curriculum import get_service

            service = get_service()
            ec = await service.aepisode_config(spec.env_id, validation=spec.validation)
            level, horizon = (ec.complexity if ec.complexity is not None else level), ec.max_turns
        finish: list[str] = []
        renderer = DatasetPrompt(renderer_for(hf_tokenizer), hf_tokenizer, str(prompt), spec)
        async with await open_session(spec.env_id, seed=spec.seed) as session:
            traj = await run_episode(
                session,
                generator(llm_engine, sampling_params, finish),
                renderer=renderer,
                horizon=horizon,
                seed=spec.seed,
                complexity=level,
                max_sequence_tokens=max_length,
                max_tokens_per_turn=sampling_params.max_tokens,
                episode_id=uuid.uuid4().hex,
            )
        if traj.stop_reason == "length" and not traj.turns:
            assert traj.tokens is not None
            raise ValueError(
                f"{spec.env_id} (seed {spec.seed}, level {traj.complexity}): its prompt of "
                f"{len(traj.tokens.prompt_ids)} tokens leaves no room for a reply within --data.max_len {max_length}"
            )
        await record(service, traj, spec)
        eos = hf_tokenizer.eos_token_id if hf_tokenizer.eos_token_id is not None else 0
        logprobs = sampling_params.logprobs is not None
        return response(traj, spec, prompt, images, eos=eos, logprobs=logprobs, truncated=finish[-1:] == ["length"])


async def record(service: CurriculumService | None, traj: Trajectory, spec: EpisodeSpec) -> None:
    """Record a finished training episode in the curriculum (void ones are skipped by it), before OpenRLHF's
    dynamic filtering can drop it."""
    if service is not None and not spec.validation:
        await service.arecord([traj])


def response(
    traj: Trajectory, spec: EpisodeSpec, prompt: Any, images: Any = None, *, eos: int, logprobs: bool, truncated: bool
) -> dict[str, Any]:
    """OpenRLHF's executor dict for a finished episode (see the module docstring)."""
    tok = traj.tokens
    assert tok is not None
    episode = EpisodeRecord.of(traj)
    if episode.trained:
        offset = len(tok.prompt_ids)
        tokens = tok.prompt_ids + tok.response_ids
        ranges = [(offset + s, offset + e) for s, e in tok.turn_spans()]
        lp = [0.0] * offset + list(tok.response_logprobs) if logprobs and tok.response_logprobs is not None else None
        reward = float(sum(traj.rewards))
    else:
        logger.warning("GymVerse episode %s (seed %s) is void (%s): %s", spec.env_id, spec.seed, traj.stop_reason,
                       traj.error)
        tokens, ranges, reward, lp, truncated = [eos, eos], [], 0.0, [0.0, 0.0] if logprobs else None, False
    logs = (spec.env_index, traj.complexity, float(traj.success), len(traj.turns), float(episode.void))
    return {
        "prompt": prompt,
        "label": json.dumps({**spec.to_dict(), "episode": episode.to_dict()}, separators=(",", ":")),
        "images": images,
        "mm_train_inputs": None,
        "reward": reward,
        "scores": float(traj.success),
        "observation_tokens": tokens,
        "action_ranges": ranges,
        "rollout_log_probs": lp,
        "truncated": truncated,
        "extra_logs": dict(zip(LOG_KEYS, logs)),
    }
