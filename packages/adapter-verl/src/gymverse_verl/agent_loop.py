"""`GymVerseAgentLoop`: one GymVerse episode per verl sample, played by `gymverse.rollout.run_episode`.

Translation only: the row's ``extra_info`` is an `EpisodeSpec`; verl's ``server_manager.generate`` is the episode's
``generate`` (one request id per episode; ``stop_reason == "aborted"`` -> ``Generation(finish_reason="abort")``, a
context-length refusal -> `GenerationError`); `renderer_for` the policy's chat template; the `Trajectory` becomes
an ``AgentLoopOutput`` whose ``extra_fields["gymverse"]`` is its `EpisodeRecord` and whose mask is all 0 when the
episode is void (`gymverse.failures`). The shared env pool is sized from ``data.train_batch_size x rollout.n``.
Finished training episodes are recorded once in the run's curriculum actor here, before verl filters anything.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from gymverse.curriculum import CurriculumService, RayCurriculum, run_scoped_name
from gymverse.pool import configure_shared_pool, pool_size_for
from gymverse.rollout import EpisodeRecord, EpisodeSpec, Generation, GenerationError, open_session, renderer_for
from gymverse.rollout import run_episode as play
from gymverse.trajectory import Trajectory
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from gymverse_verl import AGENT_NAME, EXTRA_KEY
from gymverse_verl.settings import GymVerseSettings, check_verl_config, plain

logger = logging.getLogger(__name__)
_SERVICES: dict[tuple[str, str], RayCurriculum] = {}  # curriculum handles of this worker process
# how verl 0.9.1's vLLM and SGLang servers refuse a prompt with no room left in the model's context
CONTEXT_LENGTH_ERROR = "maximum context length"


def to_generation(out: Any) -> Generation:
    """verl's ``TokenOutput`` as a `Generation` (an aborted request keeps vLLM's ``"abort"``)."""
    reason = "abort" if out.stop_reason in ("aborted", "abort") else out.stop_reason  # vLLM/SGLang: "aborted"
    return Generation(list(out.token_ids), out.log_probs or None, reason)


def merge_server_fields(acc: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """One turn's server ``extra_fields`` into the episode's, as verl's tool agent loop merges them."""
    if not acc:
        acc.update(fields)
    elif fields.get("max_global_steps") is not None:
        acc["max_global_steps"] = fields["max_global_steps"]


def agent_output(traj: Trajectory, server_fields: Mapping[str, Any], metrics: Mapping[str, float], filler: int) -> Any:
    """The ``AgentLoopOutput`` of a finished episode (module docstring); `filler` pads an empty response."""
    tok = traj.tokens
    assert tok is not None  # run_episode always records tokens
    record = EpisodeRecord.of(traj)
    response, logprobs = list(tok.response_ids), tok.response_logprobs
    mask = list(tok.response_mask) if record.trained else [0] * len(response)  # void: no trained token
    if not response:  # verl writes the score on the last response token, so keep one (masked) token
        response, mask, logprobs = [filler], [0], [0.0] if logprobs is not None else None
    env_turns = sum(1 for a, b in itertools.pairwise(tok.response_mask) if a and not b)  # env segments after a reply
    return AgentLoopOutput(
        prompt_ids=tok.prompt_ids,
        response_ids=response,
        response_mask=mask,
        response_logprobs=logprobs,
        reward_score=traj.total_reward,
        num_turns=1 + len(traj.turns) + env_turns,
        metrics=AgentLoopMetrics(**metrics),
        # verl's trainer tags and staleness metrics read min/max_global_steps from the server's fields
        extra_fields={**server_fields, EXTRA_KEY: record.to_dict(), "error": traj.error},
    )


@register(AGENT_NAME)
class GymVerseAgentLoop(AgentLoopBase):
    """Multi-turn episodes over GymVerse env sessions (select with the dataset column ``agent_name``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_verl_config(self.config)  # the only GymVerse code an async/colocate run executes: refuse loudly
        self.settings = s = GymVerseSettings.from_config(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length)
        template_kwargs = dict(plain(self.apply_chat_template_kwargs) or {})  # e.g. enable_thinking, as verl uses
        self.renderer = renderer_for(self.tokenizer, system_prompt=s.system_prompt, template_kwargs=template_kwargs)
        episodes = int(self.config.data.train_batch_size) * int(self.rollout_config.n)
        configure_shared_pool(pool_size_for(episodes), step_timeout=s.step_timeout, reset_timeout=s.reset_timeout)
        self.filler = next((t for t in (self.tokenizer.eos_token_id, self.tokenizer.pad_token_id) if t is not None), 0)

    def _curriculum(self) -> RayCurriculum | None:
        if not self.settings.curriculum.active:
            return None
        key = (run_scoped_name(self.settings.actor_name), self.settings.actor_namespace)
        if key not in _SERVICES:  # one named lookup per worker process, not one per episode
            _SERVICES[key] = self.settings.curriculum_service()
        return _SERVICES[key]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one episode; env and generation failures end it (void) instead of raising."""
        hint = " (extra_info of a GymVerse row; write rows with `gymverse-verl make-dataset`)"
        spec = EpisodeSpec.from_dict(kwargs.get("extra_info"), hint=hint)
        curriculum = self._curriculum()
        level, horizon = spec.complexity, self.settings.curriculum.max_turns
        if curriculum is not None:
            cfg = await curriculum.aepisode_config(spec.env_id, validation=spec.validation)
            level = cfg.complexity if cfg.complexity is not None else spec.complexity
            horizon = cfg.max_turns
        metrics: dict[str, float] = {}
        request_id = uuid4().hex
        server_fields: dict[str, Any] = {}  # what verl's server returns: global_steps, min/max_global_steps, ...

        async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
            params = {**sampling_params, "max_tokens": max_tokens}
            try:
                with simple_timer("generate_sequences", metrics):
                    out = await self.server_manager.generate(
                        request_id=request_id, prompt_ids=prompt_ids, sampling_params=params
                    )
            except Exception as err:  # a refusal of this request only; anything else (a dead server) propagates
                lines = [ln for ln in str(err).splitlines() if CONTEXT_LENGTH_ERROR in ln]
                if lines:
                    raise GenerationError(lines[-1].strip()) from err
                raise
            merge_server_fields(server_fields, out.extra_fields or {})
            return to_generation(out)

        start = time.perf_counter()
        session = await open_session(spec.env_id, seed=spec.seed, **self.settings.env_kwargs.get(spec.env_id, {}))
        async with session:
            traj = await play(
                session,
                generate,
                renderer=self.renderer,
                horizon=horizon,
                seed=spec.seed,
                complexity=level,
                max_response_tokens=self.response_length,
                max_tokens_per_turn=self.settings.max_tokens_per_turn,
                episode_id=request_id,
            )
        metrics["tool_calls"] = time.perf_counter() - start - metrics.get("generate_sequences", 0.0)
        prompt_tokens = len(traj.tokens.prompt_ids) if traj.tokens is not None else 0
        if prompt_tokens > self.prompt_length:
            # verl's own loops left-truncate silently, which cuts the system prompt and the task off the front
            raise ValueError(
                f"GymVerse env {spec.env_id} (seed {spec.seed}): the rendered first prompt has {prompt_tokens} "
                f"tokens, more than actor_rollout_ref.rollout.prompt_length={self.prompt_length}; raise "
                "data.max_prompt_length (or shorten gymverse.system_prompt)"
            )
        if "global_steps" in kwargs:  # an episode that never reached the server (env failed at reset)
            keys = [k for k in ("global_steps", "min_global_steps", "max_global_steps") if server_fields.get(k) is None]
            server_fields.update(dict.fromkeys(keys, int(kwargs["global_steps"])))
        return await self.finish(traj, curriculum, spec.validation, server_fields=server_fields, metrics=metrics)

    async def finish(self, traj: Trajectory, curriculum: CurriculumService | None, validation: bool, **kw: Any) -> Any:
        """Record a finished training episode in the curriculum (void ones are not counted) and build its output."""
        if traj.error is not None:
            logger.warning("GymVerse %s (seed %s): %s: %s", traj.env_id, traj.seed, traj.stop_reason, traj.error)
        if curriculum is not None and not validation:
            await curriculum.arecord([EpisodeRecord.of(traj).outcome()])
        return agent_output(traj, kw.get("server_fields", {}), kw.get("metrics", {}), self.filler)
