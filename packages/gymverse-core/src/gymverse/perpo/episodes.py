"""PERPO's building blocks over flat per-row lists: per-turn returns, env-level normalization, token placement.

Training code calls `gymverse.perpo.advantages` on an `EpisodeBatch` (`gymverse.perpo.batch`), which applies the
failure policy and then these functions; they are public for tests and benchmarks of the math itself.

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
from gymverse.perpo.returns import discounted_returns
from gymverse.perpo.stats import GroupStats, normalize_with
from gymverse.perpo.tokens import place_turn_advantages, turn_ids_from_mask


@dataclass
class TokenAdvantages:
    """Per-token advantages and returns, shaped like the response mask, and each row's per-turn values."""

    advantages: Array
    returns: Array
    turn_advantages: list[np.ndarray] | None = None  # per row, each turn's advantage (0 for a turn without tokens)
    turn_returns: list[np.ndarray] | None = None


@dataclass
class _FlatTurns:
    """Every turn of a batch, episode after episode: its return, its env's code, and each episode's turn count."""

    returns: np.ndarray  # float64, one per turn
    codes: np.ndarray  # int64 index into `keys`, one per turn
    keys: list[Hashable]
    lens: np.ndarray  # int64 turns per episode

    @property
    def starts(self) -> np.ndarray:
        """Index of each episode's first turn."""
        return np.cumsum(self.lens) - self.lens

    def groups(self, keep: np.ndarray | None = None) -> list[Hashable]:
        """The env id of every turn (of the kept ones)."""
        codes = self.codes if keep is None else self.codes[keep]
        return [self.keys[c] for c in codes.tolist()]


def _flat_returns(turn_rewards: Sequence[Sequence[float]], env_ids: Sequence[Hashable], gamma: float) -> _FlatTurns:
    if len(turn_rewards) != len(env_ids):
        raise ValueError(f"{len(turn_rewards)} episodes of turn rewards but {len(env_ids)} env ids")
    lens = np.fromiter((len(r) for r in turn_rewards), dtype=np.int64, count=len(turn_rewards))
    total = int(lens.sum())
    rewards = np.fromiter((float(v) for r in turn_rewards for v in r), dtype=np.float64, count=total)
    flat = to_numpy(discounted_returns(rewards, gamma=gamma, lengths=lens[lens > 0])) if total else rewards
    # env ids are coded per episode (a dict pass over B ids, not over every turn), then repeated per turn
    index: dict[Hashable, int] = {}
    row_codes = np.fromiter((index.setdefault(e, len(index)) for e in env_ids), dtype=np.int64, count=len(env_ids))
    return _FlatTurns(np.asarray(flat, dtype=np.float64), np.repeat(row_codes, lens), list(index), lens)


def _normalize(
    g: np.ndarray, codes: np.ndarray, keys: list[Hashable], eps: float, stats: GroupStats | None
) -> np.ndarray:
    """Env-level normalization of turn returns, with this batch's or the given (global) statistics."""
    if g.size == 0:
        return g
    if stats is None:
        return to_numpy(env_normalize(g, codes, eps=eps, num_groups=len(keys)))
    return to_numpy(normalize_with(g, [keys[c] for c in codes.tolist()], stats, eps=eps))


def perpo_stats(
    turn_rewards: Sequence[Sequence[float]], env_ids: Sequence[Hashable], *, gamma: float = 1.0
) -> GroupStats:
    """This rank's per-env (count, sum, sum of squares) of turn returns, for merging across ranks."""
    flat = _flat_returns(turn_rewards, env_ids, gamma)
    return GroupStats.from_batch(flat.returns, flat.groups())


def perpo_turn_advantages(
    turn_rewards: Sequence[Sequence[float]],
    env_ids: Sequence[Hashable],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
    stats: GroupStats | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per episode, the PERPO advantage and the return ``G_t`` of each turn (float64)."""
    flat = _flat_returns(turn_rewards, env_ids, gamma)
    adv = _normalize(flat.returns, flat.codes, flat.keys, eps, stats)
    spans = list(itertools.pairwise(np.cumsum([0, *flat.lens.tolist()]).tolist()))
    return [adv[a:b] for a, b in spans], [flat.returns[a:b] for a, b in spans]


def _turn_ids(mask: np.ndarray, turn_ends: Sequence[Sequence[int]] | None, lens: np.ndarray) -> np.ndarray:
    """Per token, its turn index (or -1 off the model's tokens and for turns without a reward)."""
    if turn_ends is None:
        ids = to_numpy(turn_ids_from_mask(mask)).astype(np.int64)
        runs = ids.max(axis=1) + 1 if ids.shape[1] else np.zeros(ids.shape[0], dtype=np.int64)
        bad = np.flatnonzero(runs > lens)
        if bad.size:
            b = int(bad[0])
            raise ValueError(
                f"row {b}: the response mask has {int(runs[b])} model turns but only {int(lens[b])} turn rewards "
                "were given"
            )
        return ids
    if len(turn_ends) != mask.shape[0]:
        raise ValueError(f"{len(turn_ends)} rows of turn_ends for a batch of {mask.shape[0]}")
    counts = np.fromiter((len(e) for e in turn_ends), dtype=np.int64, count=len(turn_ends))
    bad = np.flatnonzero(counts != lens)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"row {b}: {int(counts[b])} turn ends but {int(lens[b])} turn rewards")
    ends = np.fromiter((int(e) for row in turn_ends for e in row), dtype=np.int64, count=int(counts.sum()))
    if ends.size and int(ends.min()) < 0:
        raise ValueError(f"turn ends must be >= 0, got {int(ends.min())}")
    rows, width = mask.shape
    # Rows laid end to end on one axis (row b shifted by b * span, past every end): one searchsorted over all
    # rows' (sorted) ends gives each token the number of its row's ends at or before it, i.e. its turn index.
    span = max(width, int(ends.max()) if ends.size else 0) + 1
    shifted = ends + np.repeat(np.arange(rows, dtype=np.int64) * span, counts)
    pos = np.arange(rows, dtype=np.int64)[:, None] * span + np.arange(width, dtype=np.int64)[None, :]
    k = np.searchsorted(shifted, pos, side="right") - (np.cumsum(counts) - counts)[:, None]
    return np.where((k < counts[:, None]) & (mask != 0), k, -1)


def _token_layout(
    mask: np.ndarray,
    env_ids: Sequence[Hashable],
    turn_rewards: Sequence[Sequence[float]],
    turn_ends: Sequence[Sequence[int]] | None,
    gamma: float,
) -> tuple[np.ndarray, _FlatTurns, np.ndarray]:
    """Turn ids per token, the batch's turns, and which turns have tokens (the placed ones, trained on)."""
    if mask.ndim != 2 or mask.shape[0] != len(env_ids):
        raise ValueError(f"response_mask must be [B, T] with B = {len(env_ids)} episodes, got {mask.shape}")
    flat = _flat_returns(turn_rewards, env_ids, gamma)
    ids = _turn_ids(mask, turn_ends, flat.lens)
    placed = np.zeros(flat.returns.shape[0], dtype=bool)
    on = ids >= 0
    placed[(flat.starts[:, None] + ids)[on]] = True
    return ids, flat, placed


def perpo_token_stats(
    response_mask: Any,
    env_ids: Sequence[Hashable],
    turn_rewards: Sequence[Sequence[float]],
    *,
    turn_ends: Sequence[Sequence[int]] | None = None,
    gamma: float = 1.0,
) -> GroupStats:
    """This rank's statistics for `perpo_token_advantages` (placed turns only), for merging across ranks."""
    _, flat, placed = _token_layout(to_numpy(response_mask), env_ids, turn_rewards, turn_ends, gamma)
    return GroupStats.from_batch(flat.returns[placed], flat.groups(placed))


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
    ids, flat, placed = _token_layout(mask, env_ids, turn_rewards, turn_ends, gamma)
    adv_turns = np.zeros_like(flat.returns)
    adv_turns[placed] = _normalize(flat.returns[placed], flat.codes[placed], flat.keys, eps, stats)
    # per-turn values into [B, K] (K = most turns in a row), then onto each turn's tokens
    k = max(1, int(flat.lens.max()) if flat.lens.size else 0)
    row = np.repeat(np.arange(mask.shape[0]), flat.lens)
    col = np.arange(flat.returns.shape[0]) - np.repeat(flat.starts, flat.lens)
    adv_pad = np.zeros((mask.shape[0], k))
    ret_pad = np.zeros((mask.shape[0], k))
    adv_pad[row, col] = adv_turns
    ret_pad[row, col] = flat.returns
    adv = place_turn_advantages(adv_pad, ids, mask)
    ret = place_turn_advantages(ret_pad, ids, mask)
    dtype = response_mask.dtype if xp.isdtype(response_mask.dtype, "real floating") else xp.float64
    out = [xp.astype(from_numpy(np.asarray(x), xp, response_mask), dtype) for x in (adv, ret)]
    spans = list(itertools.pairwise(np.cumsum([0, *flat.lens.tolist()]).tolist()))
    turn_adv = [adv_turns[a:b] for a, b in spans]
    return TokenAdvantages(out[0], out[1], turn_adv, [flat.returns[a:b] for a, b in spans])
