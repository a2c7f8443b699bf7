"""`run_episode`: THE multi-turn loop. Every adapter and `RolloutCollector` run episodes through it.

One call plays one episode on a `Session` with an adapter-supplied async ``generate`` (token ids in, token ids +
log-probs out) and a `Renderer`, and returns a `Trajectory` whose `EpisodeTokens` are what an RL framework
trains on. The loop owns, in one place:

* **complexity**: ``set_complexity(complexity)`` before the reset; the level the env reports must match (a
  session that does not forward it to the base env is an error, never a silent wrong level).
* **the run's turn cap**: at most ``horizon`` model turns (then ``stop_reason="horizon"``, truncated). It is the
  run's cap (a fixed ``max_turns`` or a horizon schedule from the curriculum), applied on top of the env's own cap,
  the env's ``max_turns``, which the env enforces itself (``stop_reason="truncated"``). The smaller cap ends the
  episode; at a tie the env's truncation is reported, since the env itself ended the episode.
* **the token budget**: replies and env turns together stay within ``max_response_tokens`` (and prompt plus
  response within ``max_sequence_tokens``, for frameworks that budget the whole sequence); each generation asks
  for at most what is left (and at most ``max_tokens_per_turn``); an env turn that would not fit ends the
  episode (``stop_reason="length"``, truncated).
* **format errors**: the reply's text (`Renderer.action_text`) always goes to the env, whose parser turns
  malformed text into its format penalty; ``metrics["format_errors"]`` counts them.
* **env errors**: a reset or step that raises, or reports ``info["error"]`` (pool sessions contain crashes and
  hangs that way), ends this episode only: ``error`` set, truncated, ``stop_reason`` ``"reset_error"`` or
  ``"env_error"``; a failed step still records its turn (reward 0) because the model's tokens for it are in the
  sequence.
* **generation failures**: a reply the server aborted (``Generation.finish_reason == "abort"``, e.g. vLLM's abort
  with no tokens), a `GenerationError` (context length, an engine error for this request) and a reply with no
  token end the episode with ``generation_aborted`` / ``generation_error`` / ``empty_generation``.
* **token bookkeeping**: prompt ids, response ids, response mask (1 model / 0 env), log-probs (0.0 on env
  tokens), and ``turn_ends`` (one per `Turn`), with one `Turn` (observation, action, reward, info) per reply.

What each stop reason means for training and the curriculum is `gymverse.failures` (one policy for every
adapter). Other exceptions from ``generate`` (a dead inference server) propagate.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gymverse.failures import GenerationError
from gymverse.rollout.render import Renderer
from gymverse.rollout.session import Session
from gymverse.trajectory import EpisodeTokens, Trajectory, Turn


@dataclass
class Generation:
    """One model reply: its token ids, their log-probs when the sampler returns them, and why it stopped."""

    token_ids: Sequence[int]
    logprobs: Sequence[float] | None = None
    finish_reason: str | None = None  # the server's ("stop", "length", "abort", ...); "abort" voids the episode

    @property
    def aborted(self) -> bool:
        """Whether the server aborted the request (its tokens, if any, are not a finished reply)."""
        return self.finish_reason == "abort"


Generate = Callable[[list[int], int | None], Awaitable[Generation]]
"""``await generate(prompt_ids, max_tokens)``: the framework's generation (``max_tokens`` None: no cap)."""


class _Builder:
    """Accumulates the response tokens of one episode."""

    def __init__(self, prompt_ids: list[int]) -> None:
        self.tokens = EpisodeTokens(prompt_ids=list(prompt_ids), response_logprobs=[])

    @property
    def length(self) -> int:
        return len(self.tokens.response_ids)

    def add_reply(self, ids: list[int], logprobs: Sequence[float] | None) -> None:
        t = self.tokens
        t.response_ids += ids
        t.response_mask += [1] * len(ids)
        if t.response_logprobs is not None:
            if logprobs is None or len(logprobs) < len(ids):
                t.response_logprobs = None  # one reply without log-probs: the episode has none
            else:
                t.response_logprobs += [float(x) for x in logprobs[: len(ids)]]
        t.turn_ends.append(len(t.response_ids))

    def add_env(self, ids: list[int]) -> None:
        t = self.tokens
        t.response_ids += ids
        t.response_mask += [0] * len(ids)
        if t.response_logprobs is not None:
            t.response_logprobs += [0.0] * len(ids)

    def sequence(self) -> list[int]:
        return self.tokens.prompt_ids + self.tokens.response_ids


def _min_cap(*caps: int | None) -> int | None:
    real = [c for c in caps if c is not None]
    return min(real) if real else None


def _end(traj: Trajectory, reason: str, *, truncated: bool, error: str | None = None) -> None:
    traj.stop_reason = reason
    traj.truncated = truncated
    if error is not None:
        traj.error = error


async def run_episode(
    session: Session,
    generate: Generate,
    *,
    renderer: Renderer,
    horizon: int | None = None,
    seed: int | None = None,
    complexity: int | None = None,
    max_response_tokens: int | None = None,
    max_tokens_per_turn: int | None = None,
    max_sequence_tokens: int | None = None,
    episode_id: str | None = None,
) -> Trajectory:
    """Play one episode on `session` (see the module docstring); the caller closes the session."""
    limits = (
        ("horizon", horizon),
        ("max_response_tokens", max_response_tokens),
        ("max_sequence_tokens", max_sequence_tokens),
    )
    for name, cap in limits:
        if cap is not None and cap < 1:
            raise ValueError(f"{name} must be >= 1 or None, got {cap}")
    traj = Trajectory(env_id=session.env_id, seed=seed, complexity=complexity or 0)
    traj.episode_id = episode_id or uuid.uuid4().hex
    traj.metrics["format_errors"] = 0
    if horizon is not None:
        traj.metrics["horizon"] = horizon
    if complexity is not None:
        session.set_complexity(complexity)
    try:
        obs, info = await session.reset(seed=seed)
    except Exception as err:  # a reset failure ends only this episode, like a step failure
        obs, info = "", {"error": f"reset failed: {type(err).__name__}: {err}"}
    if info.get("error"):
        traj.tokens = EpisodeTokens(prompt_ids=renderer.initial(obs), response_logprobs=None)
        traj.final_observation = obs
        _end(traj, "reset_error", truncated=True, error=str(info["error"]))
        return _finish(traj)
    got = int(info.get("complexity", complexity if complexity is not None else 0))
    if complexity is not None and got != complexity:
        raise RuntimeError(
            f"{session.env_id}: requested complexity {complexity} but the env reset at complexity {got}; "
            "the session does not forward set_complexity to its base env"
        )
    traj.complexity = got
    traj.final_observation = obs
    seq = _Builder(renderer.initial(obs))
    traj.tokens = seq.tokens
    budget = _min_cap(
        max_response_tokens, None if max_sequence_tokens is None else max_sequence_tokens - len(seq.tokens.prompt_ids)
    )
    while True:
        left = None if budget is None else budget - seq.length
        if left is not None and left <= 0:
            _end(traj, "length", truncated=True)
            break
        cap = _min_cap(left, max_tokens_per_turn)
        try:
            gen = await generate(seq.sequence(), cap)
        except GenerationError as err:  # refused for this episode only (e.g. context length)
            _end(traj, "generation_error", truncated=True, error=f"generation failed: {err}")
            break
        if gen.aborted:
            _end(traj, "generation_aborted", truncated=True, error="the inference server aborted the generation")
            break
        ids = [int(i) for i in gen.token_ids][: cap if cap is not None else None]
        if not ids:
            _end(traj, "empty_generation", truncated=True, error="the inference server returned no token")
            break
        seq.add_reply(ids, gen.logprobs)
        action = renderer.action_text(ids)
        try:
            obs, reward, terminated, truncated, info = await session.step(action)
        except Exception as err:  # an env failure ends its own episode, never the batch
            obs, reward, terminated, truncated = "", 0.0, False, True
            info = {"error": f"{type(err).__name__}: {err}"}
        info = dict(info)
        traj.turns.append(Turn(traj.final_observation, action, float(reward), info))
        traj.final_observation = obs
        traj.metrics["format_errors"] += bool(info.get("format_error"))
        if info.get("error"):
            traj.turns[-1].reward = 0.0  # a crashed step's reward is not the policy's doing
            _end(traj, "env_error", truncated=True, error=str(info["error"]))
            break
        if terminated or truncated:
            traj.success = info.get("success") is True
            _end(traj, "terminated" if terminated else "truncated", truncated=bool(truncated) and not terminated)
            break
        if horizon is not None and len(traj.turns) >= horizon:
            # checked before the observation is tokenized: the run's cap, not the token budget, ended this episode
            traj.metrics["horizon_truncated"] = True
            _end(traj, "horizon", truncated=True)
            break
        env_ids = renderer.env_turn(obs, ids)
        if budget is not None and seq.length + len(env_ids) >= budget:
            _end(traj, "length", truncated=True)  # no room for the observation and another reply
            break
        seq.add_env(env_ids)
    return _finish(traj)


def _finish(traj: Trajectory) -> Trajectory:
    traj.metrics["turns"] = len(traj.turns)
    return traj
