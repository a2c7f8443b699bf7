"""PERPO from episodes: the one function from trajectories (or flat token arrays) to per-token advantages.

The definition (the GymVerse reference): every turn is one transition; its return is the per-turn discounted
return ``G_t = r_t + gamma * G_{t+1}`` within its episode; returns are normalized per env id over the whole
batch, ``A = (G - mean_e) / (std_e + eps)`` (population std; `gymverse.perpo.env_normalize`), or with global
statistics merged across ranks (`perpo_stats` on each rank, `GroupStats.merge` / all-reduce, then
``stats=merged``). Each model token gets the advantage of the turn that produced it; env tokens get 0.

Turn boundaries come from ``turn_ends`` (`EpisodeTokens.turn_ends`: exclusive end of each turn's model tokens in
the response) or, when a framework cannot carry them, from the response mask (turn k = the k-th run of 1s). A
turn whose tokens were all cut off by the framework's sequence limit is not trained on, so it is left out of the
statistics too (its reward still flows into the returns of the turns before it).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import array_api_compat as aac
import numpy as np

from gymverse.perpo._xp import Array, from_numpy, to_numpy
from gymverse.perpo.normalize import DEFAULT_EPS, env_normalize
from gymverse.perpo.returns import returns_from_lists
from gymverse.perpo.stats import GroupStats, normalize_with
from gymverse.perpo.tokens import place_turn_advantages, turn_ids_from_mask
from gymverse.trajectory import Trajectory


@dataclass
class TokenAdvantages:
    """Per-token advantages and returns, shaped like the response mask."""

    advantages: Array
    returns: Array


def _flat_returns(
    turn_rewards: Sequence[Sequence[float]], env_ids: Sequence[Hashable], gamma: float
) -> tuple[np.ndarray, list[Hashable], list[int]]:
    if len(turn_rewards) != len(env_ids):
        raise ValueError(f"{len(turn_rewards)} episodes of turn rewards but {len(env_ids)} env ids")
    lens = [len(r) for r in turn_rewards]
    kept = [list(map(float, r)) for r in turn_rewards if len(r)]
    rets = returns_from_lists(kept, gamma) if kept else []
    flat = np.fromiter((g for ep in rets for g in ep), dtype=np.float64, count=sum(lens))
    groups = [e for e, n in zip(env_ids, lens) for _ in range(n)]
    return flat, groups, lens


def _normalize(g: np.ndarray, groups: list[Hashable], eps: float, stats: GroupStats | None) -> np.ndarray:
    """Env-level normalization of turn returns, with this batch's or the given (global) statistics."""
    if g.size == 0:
        return g
    if stats is None:
        return to_numpy(env_normalize(g, groups, eps=eps))
    return to_numpy(normalize_with(g, groups, stats, eps=eps))


def perpo_stats(
    turn_rewards: Sequence[Sequence[float]], env_ids: Sequence[Hashable], *, gamma: float = 1.0
) -> GroupStats:
    """This rank's per-env (count, sum, sum of squares) of turn returns, for merging across ranks."""
    flat, groups, _ = _flat_returns(turn_rewards, env_ids, gamma)
    return GroupStats.from_batch(flat, groups)


def perpo_turn_advantages(
    turn_rewards: Sequence[Sequence[float]],
    env_ids: Sequence[Hashable],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
    stats: GroupStats | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per episode, the PERPO advantage and the return ``G_t`` of each turn (float64)."""
    flat, groups, lens = _flat_returns(turn_rewards, env_ids, gamma)
    adv = _normalize(flat, groups, eps, stats)
    spans = list(itertools.pairwise(np.cumsum([0, *lens]).tolist()))
    return [adv[a:b] for a, b in spans], [flat[a:b] for a, b in spans]


def _turn_ids(mask: np.ndarray, turn_ends: Sequence[Sequence[int]] | None, lens: list[int]) -> np.ndarray:
    """Per token, its turn index (or -1 off the model's tokens and for turns without a reward)."""
    if turn_ends is None:
        ids = to_numpy(turn_ids_from_mask(mask)).astype(np.int64)
        for b, n in enumerate(lens):
            runs = int(ids[b].max()) + 1 if ids.shape[1] else 0
            if runs > n:
                raise ValueError(
                    f"row {b}: the response mask has {runs} model turns but only {n} turn rewards were given"
                )
        return ids
    if len(turn_ends) != mask.shape[0]:
        raise ValueError(f"{len(turn_ends)} rows of turn_ends for a batch of {mask.shape[0]}")
    cols = np.arange(mask.shape[1])
    ids = np.full(mask.shape, -1, dtype=np.int64)
    for b, ends in enumerate(turn_ends):
        if len(ends) != lens[b]:
            raise ValueError(f"row {b}: {len(ends)} turn ends but {lens[b]} turn rewards")
        if len(ends):
            k = np.searchsorted(np.asarray(ends, dtype=np.int64), cols, side="right")
            ids[b] = np.where((k < len(ends)) & (mask[b] != 0), k, -1)
    return ids


def _token_layout(
    mask: np.ndarray,
    env_ids: Sequence[Hashable],
    turn_rewards: Sequence[Sequence[float]],
    turn_ends: Sequence[Sequence[int]] | None,
    gamma: float,
) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray, list[Hashable]]:
    """Turn ids per token, per-row returns and placed-turn flags, and the returns/env ids of the placed turns."""
    if mask.ndim != 2 or mask.shape[0] != len(env_ids):
        raise ValueError(f"response_mask must be [B, T] with B = {len(env_ids)} episodes, got {mask.shape}")
    flat, groups, lens = _flat_returns(turn_rewards, env_ids, gamma)
    ids = _turn_ids(mask, turn_ends, lens)
    cuts = list(itertools.pairwise(np.cumsum([0, *lens]).tolist()))
    rets = [flat[a:b] for a, b in cuts]
    placed = [np.isin(np.arange(n), ids[b]) for b, n in enumerate(lens)]
    keep = np.concatenate([*placed, np.zeros(0, dtype=bool)])
    return ids, rets, placed, flat[keep], [g for g, k in zip(groups, keep) if k]


def perpo_token_stats(
    response_mask: Any,
    env_ids: Sequence[Hashable],
    turn_rewards: Sequence[Sequence[float]],
    *,
    turn_ends: Sequence[Sequence[int]] | None = None,
    gamma: float = 1.0,
) -> GroupStats:
    """This rank's statistics for `perpo_token_advantages` (placed turns only), for merging across ranks."""
    _, _, _, g, groups = _token_layout(to_numpy(response_mask), env_ids, turn_rewards, turn_ends, gamma)
    return GroupStats.from_batch(g, groups)


def perpo_token_advantages(
    response_mask: Any,
    env_ids: Sequence[Hashable],
    turn_rewards: Sequence[Sequence[float]],
    *,
    turn_ends: Sequence[Sequence[int]] | None = None,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
    stats: GroupStats | None = None,
) -> TokenAdvantages:
    """PERPO advantages and returns ``[B, T]`` for a batch of responses (module docstring).

    `response_mask` is ``[B, T]`` (numpy or torch; outputs keep its namespace and device, float64 for integer
    masks, else its dtype); row ``b`` is one episode of env ``env_ids[b]`` with per-turn rewards
    ``turn_rewards[b]`` and, optionally, ``turn_ends[b]`` (exclusive end of each turn's model tokens). With
    ``stats`` (merged `perpo_token_stats` of every rank) the normalization uses the global statistics.
    """
    xp = aac.array_namespace(response_mask)
    mask = to_numpy(response_mask)
    ids, rets, placed, g, groups = _token_layout(mask, env_ids, turn_rewards, turn_ends, gamma)
    adv_flat = _normalize(g, groups, eps, stats)
    k = max([1, *(len(r) for r in rets)])
    adv_pad = np.zeros((mask.shape[0], k))
    ret_pad = np.zeros((mask.shape[0], k))
    pos = 0
    for b, (r, on) in enumerate(zip(rets, placed)):
        ret_pad[b, : len(r)] = r
        n = int(on.sum())
        adv_pad[b, np.flatnonzero(on)] = adv_flat[pos : pos + n]
        pos += n
    adv = place_turn_advantages(adv_pad, ids, mask)
    ret = place_turn_advantages(ret_pad, ids, mask)
    dtype = response_mask.dtype if xp.isdtype(response_mask.dtype, "real floating") else xp.float64
    out = [xp.astype(from_numpy(np.asarray(x), xp, response_mask), dtype) for x in (adv, ret)]
    return TokenAdvantages(out[0], out[1])


def perpo_from_trajectories(
    trajectories: Sequence[Trajectory],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
    stats: GroupStats | None = None,
) -> list[np.ndarray]:
    """Per trajectory, the PERPO advantage of every response token (`EpisodeTokens`; 0 on env tokens)."""
    for t in trajectories:
        if t.tokens is None:
            raise ValueError(f"{t.env_id}: trajectory has no token record; collect it with gymverse.rollout")
    width = max([0, *(len(t.tokens.response_mask) for t in trajectories if t.tokens is not None)])
    mask = np.zeros((len(trajectories), width), dtype=np.int64)
    for b, t in enumerate(trajectories):
        m = t.tokens.response_mask if t.tokens is not None else []
        mask[b, : len(m)] = m
    out = perpo_token_advantages(
        mask,
        [t.env_id for t in trajectories],
        [t.rewards for t in trajectories],
        turn_ends=[t.tokens.turn_ends if t.tokens is not None else [] for t in trajectories],
        gamma=gamma,
        eps=eps,
        stats=stats,
    )
    lens = [len(t.tokens.response_mask) if t.tokens is not None else 0 for t in trajectories]
    return [np.asarray(out.advantages[b, :n]) for b, n in enumerate(lens)]
