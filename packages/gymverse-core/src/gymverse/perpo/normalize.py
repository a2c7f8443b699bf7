"""Advantage estimators over flat per-transition arrays (numpy arrays, torch tensors, any array-API namespace).

Notation: ``x`` are the values being normalized (returns ``G`` or rewards ``r``), ``g(i)`` the group of entry
``i``, ``n_g`` its size, ``mean_g = sum_{g(i)=g} x_i / n_g``, ``std_g = sqrt(sum_{g(i)=g} (x_i - mean_g)^2 /
(n_g - ddof))`` (``std_g := 0`` when ``n_g <= ddof``). Every estimator:

* ``env_normalize``    PERPO environment level: ``A_i = (G_i - mean_e) / (std_e + eps)``, group = env id,
  population std (ddof 0), ``eps = 1e-9``.
* ``batch_normalize``  ReBN, one group for the whole batch: ``A_i = (G_i - mean) / (std + eps)``.
* ``grpo_advantages``  GRPO per prompt group: ``A_i = (r_i - mean_p) / (std_p + eps)``; with ``use_std=False``
  (Dr. GRPO) ``A_i = r_i - mean_p``. verl and TRL use the unbiased std and ``eps = 1e-6``: pass ``ddof=1,
  eps=1e-6`` to match them.
* ``rloo_advantages``  RLOO: ``A_i = r_i - (sum_p - r_i) / (n_p - 1) = n_p / (n_p - 1) * (r_i - mean_p)``;
  a group of one has no leave-one-out baseline and gets ``A_i = 0``.
* ``episode_advantages`` episode level: each episode's score is its first-turn return ``G_0``; scores are
  normalized across episodes (each episode counts once, whatever its length; optionally within groups of
  episodes) and the episode's advantage is copied onto all of its turns.

A group whose values are all equal has ``std = 0`` and advantages ``0`` (up to rounding divided by ``eps``; exactly
0 with ``eps = 0``).
Sums are accumulated in float64 and the result is cast back to the input's floating dtype (integer input
gives float64). Group ids may be strings, ints, or an int array; ``num_groups=K`` declares that the ids are
already dense codes in ``0..K-1`` and skips the mapping (the fast path adapters use).
"""

from __future__ import annotations

from typing import Any

import array_api_compat as aac
import numpy as np

from gymverse.perpo._xp import Array, as_float_array, from_numpy, group_codes, segment_count, segment_sum, take
from gymverse.perpo.returns import _continuation, discounted_returns

DEFAULT_EPS = 1e-9


def _check(eps: float, ddof: int) -> None:
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std) or 1 (sample std), got {ddof}")


def _codes_for(x: Array, xp: Any, group_ids: Any, num_groups: int | None) -> tuple[Array, int]:
    n = int(x.shape[0])
    if num_groups is not None:
        codes = group_ids
        if not aac.is_array_api_obj(codes):
            codes = np.asarray(codes, dtype=np.int64)
        if tuple(codes.shape) != (n,):
            raise ValueError(f"group ids must have shape ({n},), got {tuple(codes.shape)}")
        k = int(num_groups)
    else:
        codes, keys = group_codes(group_ids, n)
        k = len(keys)
    if isinstance(codes, np.ndarray) and not aac.is_numpy_namespace(xp):
        codes = from_numpy(codes.astype(np.int64, copy=False), xp, x)
    elif not aac.is_numpy_namespace(xp) and codes.dtype != xp.int64:
        codes = xp.astype(codes, xp.int64)
    return codes, k


def _moments(xa: Array, codes: Array, k: int, ddof: int) -> tuple[Array, Array, Array]:
    """Per-group (count, std) and per-entry deviation ``x - mean_g``, with a centred second pass."""
    xp = aac.array_namespace(xa)
    count = segment_count(codes, k, xa)
    safe = xp.where(count > 0, count, xp.ones_like(count))
    mean = segment_sum(xa, codes, k) / safe
    dev = xa - take(mean, codes)
    m2 = segment_sum(dev * dev, codes, k)
    denom = count - ddof
    var = xp.where(denom > 0, m2 / xp.where(denom > 0, denom, xp.ones_like(denom)), xp.zeros_like(m2))
    return count, xp.sqrt(var), dev


def group_normalize(
    values: Any,
    group_ids: Any,
    *,
    eps: float = DEFAULT_EPS,
    ddof: int = 0,
    scale: bool = True,
    num_groups: int | None = None,
) -> Array:
    """``(x - mean_g) / (std_g + eps)`` per group (``x - mean_g`` when ``scale=False``)."""
    _check(eps, ddof)
    x, xp = as_float_array(values)
    if x.shape[0] == 0:
        return x
    codes, k = _codes_for(x, xp, group_ids, num_groups)
    xa = xp.astype(x, xp.float64, copy=False)
    _, std, dev = _moments(xa, codes, k, ddof)
    # divide the K group stds once and multiply per transition (same value as dividing, to rounding)
    # (with eps = 0 a constant group would be 0/0; it gets advantage 0 instead)
    denom = std + eps
    inv = xp.where(denom > 0, 1.0 / xp.where(denom > 0, denom, xp.ones_like(denom)), xp.zeros_like(denom))
    out = dev * take(inv, codes) if scale else dev
    return xp.astype(out, x.dtype, copy=False)


def env_normalize(returns: Any, env_ids: Any, *, eps: float = DEFAULT_EPS, num_groups: int | None = None) -> Array:
    """PERPO environment-level advantages ``(G - mean_e) / (std_e + eps)`` (population std)."""
    return group_normalize(returns, env_ids, eps=eps, ddof=0, num_groups=num_groups)


def batch_normalize(values: Any, *, eps: float = DEFAULT_EPS, ddof: int = 0) -> Array:
    """ReBN: ``(x - mean) / (std + eps)`` over the whole batch."""
    x, xp = as_float_array(values)
    zeros = xp.zeros(x.shape, dtype=xp.int64, device=aac.device(x))
    return group_normalize(x, zeros, eps=eps, ddof=ddof, num_groups=1)


def grpo_advantages(
    rewards: Any,
    prompt_ids: Any,
    *,
    use_std: bool = True,
    eps: float = DEFAULT_EPS,
    ddof: int = 0,
    num_groups: int | None = None,
) -> Array:
    """GRPO per-prompt advantages ``(r - mean_p) / (std_p + eps)``, or ``r - mean_p`` if not `use_std`."""
    return group_normalize(rewards, prompt_ids, eps=eps, ddof=ddof, scale=use_std, num_groups=num_groups)


def rloo_advantages(rewards: Any, prompt_ids: Any, *, num_groups: int | None = None) -> Array:
    """RLOO: ``r_i`` minus the mean of the other samples of its prompt (0 for a group of one)."""
    x, xp = as_float_array(rewards, "rewards")
    if x.shape[0] == 0:
        return x
    codes, k = _codes_for(x, xp, prompt_ids, num_groups)
    xa = xp.astype(x, xp.float64, copy=False)
    count = segment_count(codes, k, xa)
    total = segment_sum(xa, codes, k)
    n_i = take(count, codes)
    others = n_i - 1
    baseline = (take(total, codes) - xa) / xp.where(others > 0, others, xp.ones_like(others))
    out = xp.where(others > 0, xa - baseline, xp.zeros_like(xa))
    return xp.astype(out, x.dtype, copy=False)


def episode_advantages(
    rewards: Any,
    *,
    gamma: float = 1.0,
    lengths: Any = None,
    episode_ids: Any = None,
    episode_groups: Any = None,
    eps: float = DEFAULT_EPS,
    ddof: int = 0,
) -> Array:
    """Episode-level advantages: normalize each episode's ``G_0`` across episodes, copy it onto its turns.

    `episode_groups` (one key per episode, e.g. env id or prompt id) normalizes within groups of episodes;
    without it the whole batch is one group.
    """
    x, xp = as_float_array(rewards, "rewards")
    n = int(x.shape[0])
    cont = _continuation(n, lengths, episode_ids, None)
    if n == 0:
        return x
    cont_np = cont if isinstance(cont, np.ndarray) else np.asarray(cont)
    starts = np.ones(n, dtype=bool)
    starts[1:] = ~cont_np[:-1]
    episode_of = np.cumsum(starts) - 1
    n_eps = int(episode_of[-1]) + 1
    g = discounted_returns(x, gamma=gamma, dones=~cont_np)
    scores = take(g, from_numpy(np.flatnonzero(starts), xp, x))
    if episode_groups is None:
        adv = batch_normalize(scores, eps=eps, ddof=ddof)
    else:
        adv = group_normalize(scores, episode_groups, eps=eps, ddof=ddof)
    if adv.shape[0] != n_eps:
        raise ValueError(f"episode_groups must have one key per episode ({n_eps})")
    return take(adv, from_numpy(episode_of, xp, x))
