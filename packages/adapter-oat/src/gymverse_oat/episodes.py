"""Translation between the core episode pipeline and oat: vLLM outputs in, oat multi-turn transitions out.

`episode_transitions` cuts a finished `Trajectory` into oat transitions, one per turn: ``prompt`` is everything
the model saw before the turn, ``response`` the ids it generated (the core's `EpisodeTokens.turn_spans`), with
their sampler log-probs. Failure policy (`gymverse.failures`): a void episode (env or generation failure) gives
no transition at all, so it is neither trained, nor in the PERPO statistics, nor recorded by the curriculum
(which the learner feeds from transitions); length and horizon cuts are trained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gymverse.failures import is_trained
from gymverse.rollout import EpisodeRecord, Generation, Renderer, decode_prefixes
from gymverse.trajectory import Trajectory
from oat.types import Transition


@dataclass
class GymVerseTransition(Transition):
    """oat's multi-turn `Transition` plus the episode's identity (oat code reads only the base fields)."""

    env_id: str = ""
    episode_id: str = ""
    success: bool = False
    complexity: int = 0
    turn: int = 0
    stop_reason: str = "terminated"


def record_of(episode: Sequence[GymVerseTransition]) -> EpisodeRecord:
    """The core `EpisodeRecord` of one episode's transitions (turn ends: cumulative reply lengths)."""
    t = episode[-1]
    ends = [sum(len(x.response_ids) for x in episode[: k + 1]) for k in range(len(episode))]
    rewards = tuple(float(x.rewards) for x in episode)
    return EpisodeRecord(t.env_id, rewards, tuple(ends), t.stop_reason, t.complexity, t.success, t.episode_id)


def generations_from_vllm(outputs: Sequence[Any]) -> list[Generation]:
    """Token ids, chosen-token log-probs (None when not asked for) and finish reason of vLLM ``RequestOutput``s.

    An aborted request (``finish_reason == "abort"``, usually with no tokens) stays aborted: its episode is void.
    """
    gens = []
    for out in outputs:
        c = out.outputs[0]
        ids = [int(t) for t in c.token_ids]
        lps = None if c.logprobs is None else [float(step[t].logprob) for t, step in zip(ids, c.logprobs)]
        gens.append(Generation(ids, lps, c.finish_reason))
    return gens


def episode_transitions(
    traj: Trajectory, renderer: Renderer, *, ignore_no_eos: bool = False, stop_ids: frozenset[int] = frozenset()
) -> list[GymVerseTransition]:
    """oat transitions of one finished episode (one per turn; none for a void episode or one without turns)."""
    tok = traj.tokens
    if tok is None or not traj.turns or not is_trained(traj.stop_reason or "terminated"):
        return []
    if tok.response_logprobs is None:
        raise ValueError(f"{traj.env_id}: the generator returned no log-probs (ask vLLM for logprobs=1)")
    out = []
    spans = tok.turn_spans()
    n, full = len(tok.prompt_ids), tok.prompt_ids + tok.response_ids
    # cut before and after each reply: prefix 2k is turn k's prompt, piece 2k+1 its reply
    prefixes, pieces = decode_prefixes(renderer, full, [n + i for span in spans for i in span])
    for k, (turn, (start, end)) in enumerate(zip(traj.turns, spans, strict=True)):
        prompt_ids = full[: n + start]
        reply = full[n + start : n + end]
        no_eos = not reply or reply[-1] not in stop_ids
        info = {"gymverse/complexity": float(traj.complexity), "gymverse/turn": float(k)}
        out.append(
            GymVerseTransition(
                obs=turn.observation,
                action=turn.action,
                rewards=float(turn.reward),
                done=k == len(traj.turns) - 1,
                prompt=prefixes[2 * k],
                prompt_ids=prompt_ids,
                response=pieces[2 * k + 1],
                response_ids=reply,
                response_logprobs=list(tok.response_logprobs[start:end]),
                response_is_truncated=no_eos,
                action_is_formatted=not turn.info.get("format_error", False),
                loss_mask=not (ignore_no_eos and no_eos),
                info={**info, "gymverse/success": float(traj.success)},
                env_id=traj.env_id,
                episode_id=traj.episode_id,
                success=bool(traj.success),
                complexity=int(traj.complexity),
                turn=k,
                stop_reason=traj.stop_reason or "terminated",
            )
        )
    return out
