"""Discounted per-turn returns ``G_t = r_t + gamma * G_{t+1}`` (``G = 0`` past an episode's last turn).

Episodes are ragged and laid out flat, one entry per transition in time order, episode after episode. The
boundaries come from exactly one of ``lengths`` (turns per episode), ``episode_ids`` (one id per transition;
each episode's transitions must be contiguous) or ``dones`` (True on each episode's last transition; the end of
the array always closes the last episode). The recurrence runs as a segmented affine scan by doubling:
``G_t = b_t + a_t * G_{t+s}`` with ``a = gamma * [same episode continues]``, composing ``s = 1, 2, 4, ...``, so
the cost is ``O(n log L)`` for the longest episode length ``L``, with only slicing and concatenation (any
array-API namespace, no Python loop over transitions, no ``gamma ** -t`` overflow).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import array_api_compat as aac
import numpy as np

from gymverse.perpo._xp import Array, as_float_array, from_numpy, to_numpy
from gymverse.trajectory import Trajectory


def _continuation(n: int, lengths: Any, episode_ids: Any, dones: Any) -> np.ndarray | Array:
    given = sum(v is not None for v in (lengths, episode_ids, dones))
    if given != 1:
        raise ValueError("pass exactly one of lengths=, episode_ids=, dones= to mark episode boundaries")
    if lengths is not None:
        lens = np.asarray(to_numpy(lengths) if aac.is_array_api_obj(lengths) else lengths, dtype=np.int64)
        if lens.ndim != 1 or (lens.size and lens.min() < 1):
            raise ValueError(f"lengths must be a 1-D sequence of positive ints, got {lens.tolist()[:8]}")
        if int(lens.sum()) != n:
            raise ValueError(f"lengths sum to {int(lens.sum())} but there are {n} rewards")
        cont = np.ones(n, dtype=bool)
        cont[np.cumsum(lens) - 1] = False
        return cont
    if dones is not None:
        d = to_numpy(dones) if aac.is_array_api_obj(dones) else np.asarray(dones)
        if d.shape != (n,):
            raise ValueError(f"dones must have shape ({n},), got {d.shape}")
        cont = ~d.astype(bool)
        if n:
            cont[-1] = False
        return cont
    ids = to_numpy(episode_ids) if aac.is_array_api_obj(episode_ids) else np.asarray(episode_ids)
    if ids.shape != (n,):
        raise ValueError(f"episode_ids must have shape ({n},), got {ids.shape}")
    if n == 0:
        return np.zeros(0, dtype=bool)
    cont = np.zeros(n, dtype=bool)
    cont[:-1] = ids[:-1] == ids[1:]
    runs = int(n - cont.sum())
    if runs != len(np.unique(ids)):
        raise ValueError(
            "episode_ids are not contiguous: an episode's transitions must be adjacent and in time order "
            f"({runs} runs but {len(np.unique(ids))} distinct ids)"
        )
    return cont


def discounted_returns(
    rewards: Any,
    *,
    gamma: float = 1.0,
    lengths: Any = None,
    episode_ids: Any = None,
    dones: Any = None,
) -> Array:
    """Per-transition discounted returns of flat ragged episodes, in the rewards' namespace and device."""
    if not 0.0 <= float(gamma) <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    r, xp = as_float_array(rewards, "rewards")
    n = int(r.shape[0])
    cont = _continuation(n, lengths, episode_ids, dones)
    if n == 0:
        return r
    cont_x = from_numpy(cont, xp, r) if isinstance(cont, np.ndarray) else cont
    a = xp.astype(cont_x, r.dtype) * float(gamma)
    b = r
    shift = 1
    while shift < n and bool(xp.any(a != 0)):
        pad = xp.zeros(min(shift, n), dtype=r.dtype, device=aac.device(r))
        b = b + a * xp.concat([b[shift:], pad])
        a = a * xp.concat([a[shift:], pad])
        shift *= 2
    return b


def returns_from_lists(episodes: Sequence[Sequence[float]], gamma: float = 1.0) -> list[list[float]]:
    """Discounted returns for a list of per-episode reward lists (numpy, float64)."""
    lens = [len(ep) for ep in episodes]
    if any(n == 0 for n in lens):
        raise ValueError("every episode needs at least one reward")
    flat = np.fromiter((float(v) for ep in episodes for v in ep), dtype=np.float64, count=sum(lens))
    out = to_numpy(discounted_returns(flat, gamma=gamma, lengths=lens)) if lens else flat
    offsets = np.cumsum([0, *lens])
    return [out[offsets[i] : offsets[i + 1]].tolist() for i in range(len(lens))]


def fill_returns(trajectories: Sequence[Trajectory], gamma: float = 1.0) -> None:
    """Set ``turn.ret`` on every turn of `trajectories` (episodes without turns are skipped)."""
    eps = [t for t in trajectories if t.turns]
    for traj, rets in zip(eps, returns_from_lists([t.rewards for t in eps], gamma), strict=True):
        for turn, g in zip(traj.turns, rets, strict=True):
            turn.ret = float(g)
