"""Place per-turn advantages on response tokens.

A multi-turn sample is one token sequence in which the model's responses are interleaved with prompt and
environment tokens; ``response_mask`` is 1 on the model's tokens. Each maximal run of 1s is one turn, so turn
ids follow from the mask alone (`turn_ids_from_mask`); `place_turn_advantages` then gives every response token
its turn's advantage and every other token 0. Inputs are ``[B, T]`` (or ``[T]``) arrays of any array-API
namespace; outputs keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import array_api_compat as aac
import numpy as np

from gymverse.perpo._xp import Array, take, to_numpy


def turn_ids_from_mask(response_mask: Any) -> Array:
    """Per token: index of its response segment within the row (0, 1, ...), or -1 off the response."""
    xp = aac.array_namespace(response_mask)
    m = xp.astype(response_mask != 0, xp.int64)
    if m.ndim not in (1, 2):
        raise ValueError(f"response_mask must be [T] or [B, T], got shape {tuple(m.shape)}")
    prev = xp.concat([xp.zeros_like(m[..., :1]), m[..., :-1]], axis=-1)
    starts = m * (1 - prev)
    ids = xp.cumulative_sum(starts, axis=-1) - 1
    return xp.where(m > 0, ids, xp.full_like(ids, -1))


def place_turn_advantages(turn_advantages: Any, turn_ids: Any, response_mask: Any = None) -> Array:
    """Token advantages ``adv[b, turn_ids[b, t]]`` on response tokens, 0 elsewhere.

    `turn_advantages` is ``[B, K]`` (row-padded; ``[K]`` for 1-D `turn_ids`); `turn_ids` is -1 off the response
    (see `turn_ids_from_mask`); an optional `response_mask` zeroes further tokens (e.g. truncated responses).
    """
    xp = aac.array_namespace(turn_advantages, turn_ids)
    adv, ids = turn_advantages, turn_ids
    squeeze = ids.ndim == 1
    if squeeze:
        adv, ids = adv[None, ...], ids[None, ...]
    if adv.ndim != 2 or ids.ndim != 2 or adv.shape[0] != ids.shape[0]:
        raise ValueError(
            f"turn_advantages {tuple(turn_advantages.shape)} and turn_ids {tuple(turn_ids.shape)} must be "
            "[B, K] and [B, T] (or [K] and [T])"
        )
    b, k = int(adv.shape[0]), int(adv.shape[1])
    ids = xp.astype(ids, xp.int64)
    if ids.shape[1] and int(xp.max(ids)) >= k:
        raise IndexError(f"turn id {int(xp.max(ids))} has no advantage: only {k} turns per row given")
    on = ids >= 0
    if response_mask is not None:
        mask = response_mask[None, ...] if squeeze else response_mask
        if tuple(mask.shape) != tuple(ids.shape):
            raise ValueError(f"response_mask shape {tuple(mask.shape)} != turn_ids shape {tuple(ids.shape)}")
        on = on & (mask != 0)
    rows = xp.arange(b, dtype=xp.int64, device=aac.device(ids))[:, None] * k
    flat = xp.reshape(rows + xp.where(on, ids, xp.zeros_like(ids)), (-1,))
    vals = xp.reshape(take(xp.reshape(adv, (-1,)), flat), ids.shape) if k else xp.zeros(ids.shape)
    out = xp.where(on, vals, xp.zeros_like(vals))
    return out[0, ...] if squeeze else out


def broadcast_sequence_advantages(advantages: Any, response_mask: Any) -> Array:
    """One advantage per row ``[B]`` spread over its response tokens ``[B, T]`` (single-turn samples)."""
    xp = aac.array_namespace(advantages, response_mask)
    if advantages.ndim != 1 or response_mask.ndim != 2 or advantages.shape[0] != response_mask.shape[0]:
        raise ValueError(
            f"advantages {tuple(advantages.shape)} must be [B] for a response_mask of [B, T], "
            f"got mask {tuple(response_mask.shape)}"
        )
    return advantages[:, None] * xp.astype(response_mask != 0, advantages.dtype)


def turn_ends_from_mask(response_mask: Any, turns: Sequence[int] | None = None) -> list[list[int]]:
    """Per row of a ``[B, T]`` mask, the exclusive end of each run of 1s (one run = one turn's model tokens).

    For frameworks that carry the mask but not the turn ends. With `turns` (the turn count of each row) a row with
    fewer runs than turns had its last turns cut off by a length limit: they get ends past the row (no tokens).
    """
    mask = to_numpy(response_mask)
    if mask.ndim != 2:
        raise ValueError(f"response_mask must be [B, T], got shape {tuple(mask.shape)}")
    m = (mask != 0).astype(np.int8)
    width = int(m.shape[1])
    nxt = np.concatenate([m[:, 1:], np.zeros((m.shape[0], 1), dtype=np.int8)], axis=1)
    rows, cols = np.nonzero((m == 1) & (nxt == 0))
    out: list[list[int]] = [[] for _ in range(m.shape[0])]
    for r, c in zip(rows.tolist(), cols.tolist()):
        out[r].append(c + 1)
    if turns is not None:
        if len(turns) != len(out):
            raise ValueError(f"{len(turns)} turn counts for a mask of {len(out)} rows")
        for r, (ends, n) in enumerate(zip(out, turns)):
            if len(ends) > n:
                raise ValueError(f"row {r}: the response mask has {len(ends)} model turns but only {n} turns")
            ends += [width + 1 + k for k in range(n - len(ends))]
    return out
