"""`GymVerseAgentLoop`: one multi-turn GymVerse episode per verl sample.

The conversation is system prompt, then the env's first observation as a user message; each model reply is the
action, each env observation comes back as the next user message. Tokens go through verl's own Continuous Token
builder (``ct_build_initial_tokens`` / ``ct_merge_assistant_token`` / ``ct_merge_context_msg``), so chat-template
boundaries match verl's other agent loops: model tokens get ``response_mask`` 1 and their log-probs, observation
and template tokens get 0 and log-prob 0. The response never exceeds ``rollout.response_length``.

Per-turn env rewards travel in ``extra_fields["turn_rewards"]`` (one per model turn, in order) for the PERPO
estimator; ``reward_score`` is the episode's undiscounted return.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from gymverse_verl import AGENT_NAME
from gymverse_verl.curriculum import curriculum_actor
from gymverse_verl.sessions import open_session
from gymverse_verl.settings import GymVerseSettings

logger = logging.getLogger(__name__)
_ACTORS: dict[tuple[str, str | None], Any] = {}  # curriculum actor handles of this worker process


@dataclass(frozen=True)
class EpisodeSpec:
    """What one dataset row asks for: env id, seed and (dataset) complexity."""

    env_id: str
    seed: int | None
    complexity: int | None


def _item(value: Any) -> Any:
    """numpy scalars / 0-d arrays (how non-tensor batch values arrive) to Python values."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else value


def episode_spec(row: Mapping[str, Any]) -> EpisodeSpec:
    """The episode a dataset row describes (``extra_info`` first, then ``data_source`` for the env id)."""
    extra = _item(row.get("extra_info")) or {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"extra_info must be a dict with env_id/seed/complexity, got {type(extra).__name__}")
    env_id = extra.get("env_id") or _item(row.get("data_source"))
    if not env_id:
        raise ValueError("GymVerse row has no env id: set extra_info.env_id (or data_source) to a GymVerse env id")
    seed, level = _item(extra.get("seed")), _item(extra.get("complexity"))
    return EpisodeSpec(str(env_id), None if seed is None else int(seed), None if level is None else int(level))


def _error_info(spec: EpisodeSpec, exc: Exception) -> dict[str, Any]:
    logger.exception("GymVerse env %s (seed %s) failed", spec.env_id, spec.seed)
    return {"error": f"{type(exc).__name__}: {exc}", "success": False}


def _needs_actor(settings: GymVerseSettings) -> bool:
    return settings.evolution or settings.horizon is not None


@register(AGENT_NAME)
class GymVerseAgentLoop(AgentLoopBase):
    """Multi-turn episodes over GymVerse env sessions (select with the dataset column ``agent_name``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = GymVerseSettings.from_config(self.config)
        self.response_length = int(self.rollout_config.response_length)
        self._tokenizer: Any = self.tokenizer  # a PreTrainedTokenizer (verl annotates it as AutoTokenizer)

    async def _episode_config(self, spec: EpisodeSpec) -> tuple[int | None, int | None]:
        """(level, turn cap) for this reset: the curriculum actor's when it is in use, else the row's."""
        if not _needs_actor(self.settings):
            return spec.complexity, self.settings.max_turns
        key = (self.settings.actor_name, self.settings.actor_namespace)
        if key not in _ACTORS:  # one named lookup per worker process, not one per episode
            _ACTORS[key] = curriculum_actor(self.settings)
        cfg = await _ACTORS[key].episode_config.remote(spec.env_id)
        level = cfg["complexity"] if cfg["complexity"] is not None else spec.complexity
        return level, cfg["max_turns"]

    def _filler_token(self) -> int:
        tok: Any = self.tokenizer
        for tid in (tok.eos_token_id, tok.pad_token_id):
            if tid is not None:
                return int(tid)
        return 0

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one episode; env failures end it (truncated, ``extra_fields["error"]``) instead of raising."""
        spec = episode_spec(kwargs)
        level, horizon = await self._episode_config(spec)
        metrics: dict[str, float] = {}
        messages: list[dict[str, str]] = []
        if self.settings.system_prompt:
            messages.append({"role": "system", "content": self.settings.system_prompt})
        turn_rewards: list[float] = []
        success, error, stop = False, None, "done"
        used_level = level
        request_id = uuid4().hex  # one id per episode: sticky routing keeps the prefix cache across turns
        mask: list[int] = []
        logprobs: list[float] | None = None
        runtime: list[int] = []
        session = None
        try:
            with simple_timer("tool_calls", metrics):
                try:  # env failures end this episode only; generation-server failures propagate to verl
                    session = await open_session(
                        spec.env_id,
                        seed=spec.seed,
                        complexity=level,
                        env_kwargs=self.settings.env_kwargs.get(spec.env_id),
                        max_concurrency=self.settings.max_concurrent_sessions,
                        step_timeout=self.settings.step_timeout,
                    )
                    obs, info = await session.reset(spec.seed)
                except Exception as exc:
                    obs, info = "", _error_info(spec, exc)
            used_level = info.get("complexity", level)
            if info.get("error"):
                error, stop = str(info["error"]), "env_error"
            messages.append({"role": "user", "content": obs})
            runtime = await self.ct_build_initial_tokens(messages)
            turn = 0
            while error is None:
                if horizon is not None and turn >= horizon:
                    stop = "horizon"
                    break
                budget = self.response_length - len(mask)
                if budget <= 0:
                    stop = "length"
                    break
                cap = min(budget, self.settings.max_tokens_per_turn or budget)
                with simple_timer("generate_sequences", metrics):
                    out = await self.server_manager.generate(
                        request_id=request_id,
                        prompt_ids=runtime,
                        sampling_params={**sampling_params, "max_tokens": cap},
                    )
                tokens = list(out.token_ids)[:cap]
                if not tokens:
                    stop = "empty_generation"
                    break
                if turn == 0 and out.log_probs:
                    logprobs = []
                merge, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime,
                    tokens,
                    mask,
                    logprobs,
                    assistant_logprobs=list(out.log_probs)[: len(tokens)] if logprobs is not None else None,
                )
                runtime = merge.token_ids
                action = str(self._tokenizer.decode(tokens, skip_special_tokens=True))
                messages.append({"role": "assistant", "content": action})
                turn += 1
                assert session is not None  # no session means the reset failed, so the loop never started
                with simple_timer("tool_calls", metrics):
                    try:  # EnvPool already turns env exceptions into error results; this guards the pool itself
                        obs, reward, terminated, truncated, info = await session.step(action)
                    except Exception as exc:
                        obs, reward, terminated, truncated, info = "", 0.0, False, True, _error_info(spec, exc)
                turn_rewards.append(float(reward))
                if info.get("error"):
                    error, stop = str(info["error"]), "env_error"
                    break
                if terminated or truncated:
                    success, stop = bool(info.get("success", False)), "terminated" if terminated else "truncated"
                    break
                if len(mask) >= self.response_length:
                    stop = "length"
                    break
                previous = list(messages)
                messages.append({"role": "user", "content": obs})
                merge, new_mask, new_logprobs = await self.ct_merge_context_msg(
                    previous, messages, runtime, mask, logprobs
                )
                if len(new_mask) >= self.response_length:  # no room left for another reply
                    stop = "length"
                    break
                runtime, mask, logprobs = merge.token_ids, new_mask, new_logprobs
        finally:
            if session is not None:
                await session.close()
        if not runtime:  # failed before the prompt existed
            runtime = await self.ct_build_initial_tokens(messages or [{"role": "user", "content": ""}])
        return self._output(
            runtime,
            mask,
            logprobs,
            metrics,
            messages,
            spec,
            used_level,
            horizon,
            turn_rewards,
            success,
            error,
            stop,
        )

    def _output(
        self,
        runtime: list[int],
        mask: list[int],
        logprobs: list[float] | None,
        metrics: dict[str, float],
        messages: list[dict[str, str]],
        spec: EpisodeSpec,
        level: int | None,
        horizon: int | None,
        turn_rewards: list[float],
        success: bool,
        error: str | None,
        stop: str,
    ) -> AgentLoopOutput:
        n = len(mask)
        prompt_ids, response_ids = (runtime[: len(runtime) - n], runtime[len(runtime) - n :]) if n else (runtime, [])
        if not response_ids:  # verl writes the score on the last response token, so keep one (masked) token
            response_ids, mask = [self._filler_token()], [0]
            logprobs = [0.0] if logprobs is not None else None
        cut = self.response_length
        chat_turns = sum(1 for m in messages if m["role"] != "system")
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:cut],
            response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs is not None else None,
            reward_score=float(sum(turn_rewards)),
            num_turns=chat_turns,
            metrics=AgentLoopMetrics(
                generate_sequences=metrics.get("generate_sequences", 0.0), tool_calls=metrics.get("tool_calls", 0.0)
            ),
            extra_fields={
                "env_id": spec.env_id,
                "seed": spec.seed,
                "complexity": level,
                "horizon": horizon,
                "success": success,
                "turn_rewards": turn_rewards,
                "episode_turns": len(turn_rewards),
                "stop_reason": stop,
                "error": error,
                "turn_scores": [],
                "tool_rewards": [],
            },
        )
