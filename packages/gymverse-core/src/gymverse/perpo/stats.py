"""Distributed env-level normalization: per-group sufficient statistics that combine exactly across ranks.

Each rank computes ``GroupStats.from_batch(returns, env_ids)`` (count, sum and sum of squares per key, float64),
the ranks combine them (``merge``; or ``all_reduce(SUM)`` of ``to_array(keys)`` when every rank knows the key
set up front, since merging is plain addition), and each rank normalizes its own transitions with the global
statistics: ``normalize_with(returns, env_ids, stats)``. With ``mean = sum / n`` and ``var = max(sumsq - sum^2
/ n, 0) / (n - ddof)`` the result equals `env_normalize` on the concatenated batch up to float64 rounding (the
one-pass variance can dip below zero by rounding, hence the clamp). Keys are JSON scalars (env ids).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import array_api_compat as aac
import numpy as np

from gymverse.perpo._xp import (
    Array,
    as_float_array,
    from_numpy,
    group_codes,
    segment_count,
    segment_sum,
    take,
    to_numpy,
)
from gymverse.perpo.normalize import DEFAULT_EPS, _check


@dataclass
class GroupStats:
    """Count, sum and sum of squares per group key (float64 numpy; a few entries per env)."""

    keys: list[Hashable] = field(default_factory=list)
    count: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sumsq: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        self.count = np.asarray(self.count, dtype=np.float64).reshape(-1)
        self.sum = np.asarray(self.sum, dtype=np.float64).reshape(-1)
        self.sumsq = np.asarray(self.sumsq, dtype=np.float64).reshape(-1)
        k = len(self.keys)
        if not (self.count.size == self.sum.size == self.sumsq.size == k):
            raise ValueError(
                f"GroupStats: {k} keys but count/sum/sumsq have {self.count.size}/{self.sum.size}/"
                f"{self.sumsq.size} entries"
            )
        if len(set(self.keys)) != k:
            raise ValueError("GroupStats: duplicate keys")

    @classmethod
    def from_batch(cls, values: Any, group_ids: Any) -> GroupStats:
        """Statistics of one (local) batch."""
        x, xp = as_float_array(values)
        codes, keys = group_codes(group_ids, int(x.shape[0]))
        if not keys:
            return cls()
        if isinstance(codes, np.ndarray) and not aac.is_numpy_namespace(xp):
            codes = from_numpy(codes, xp, x)
        xa = xp.astype(x, xp.float64, copy=False)
        k = len(keys)
        return cls(
            keys,
            to_numpy(segment_count(codes, k, xa)),
            to_numpy(segment_sum(xa, codes, k)),
            to_numpy(segment_sum(xa * xa, codes, k)),
        )

    def index(self) -> dict[Hashable, int]:
        """Row of each key."""
        return {k: i for i, k in enumerate(self.keys)}

    def merge(self, *others: GroupStats) -> GroupStats:
        """Exact combination with other ranks' stats (groups missing on some ranks included)."""
        keys = list(self.keys)
        idx = self.index()
        for o in others:
            for k in o.keys:
                if k not in idx:
                    idx[k] = len(keys)
                    keys.append(k)
        out = GroupStats(keys, np.zeros(len(keys)), np.zeros(len(keys)), np.zeros(len(keys)))
        for part in (self, *others):
            rows = np.asarray([idx[k] for k in part.keys], dtype=np.int64)
            if rows.size:
                np.add.at(out.count, rows, part.count)
                np.add.at(out.sum, rows, part.sum)
                np.add.at(out.sumsq, rows, part.sumsq)
        return out

    def mean(self) -> np.ndarray:
        """Per-key mean (0 for an empty group)."""
        return self.sum / np.maximum(self.count, 1.0)

    def std(self, ddof: int = 0) -> np.ndarray:
        """Per-key std ``sqrt(max(sumsq - sum^2/n, 0) / (n - ddof))`` (0 when ``n <= ddof``)."""
        n = self.count
        m2 = np.maximum(self.sumsq - self.sum * self.sum / np.maximum(n, 1.0), 0.0)
        denom = n - ddof
        return np.sqrt(np.where(denom > 0, m2 / np.where(denom > 0, denom, 1.0), 0.0))

    def to_array(self, keys: Sequence[Hashable] | None = None) -> np.ndarray:
        """A ``(len(keys), 3)`` array of (count, sum, sumsq) in `keys` order (zeros for absent keys)."""
        keys = list(self.keys) if keys is None else list(keys)
        idx = self.index()
        out = np.zeros((len(keys), 3))
        for i, k in enumerate(keys):
            if k in idx:
                j = idx[k]
                out[i] = (self.count[j], self.sum[j], self.sumsq[j])
        return out

    @classmethod
    def from_array(cls, keys: Sequence[Hashable], array: Any) -> GroupStats:
        """Inverse of `to_array` (e.g. after an all-reduce); rows with count 0 are dropped."""
        a = np.asarray(to_numpy(array) if aac.is_array_api_obj(array) else array, dtype=np.float64)
        if a.shape != (len(keys), 3):
            raise ValueError(f"expected an array of shape ({len(keys)}, 3), got {a.shape}")
        keep = a[:, 0] > 0
        return cls([k for k, m in zip(keys, keep) if m], a[keep, 0], a[keep, 1], a[keep, 2])

    def to_dict(self) -> dict[str, Any]:
        """JSON form (e.g. for ``all_gather_object``)."""
        return {
            "keys": list(self.keys),
            "count": self.count.tolist(),
            "sum": self.sum.tolist(),
            "sumsq": self.sumsq.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupStats:
        """Inverse of `to_dict`."""
        return cls(list(data["keys"]), data["count"], data["sum"], data["sumsq"])

    def normalize(self, values: Any, group_ids: Any, *, eps: float = DEFAULT_EPS, ddof: int = 0) -> Array:
        """`normalize_with` bound to these statistics."""
        return normalize_with(values, group_ids, self, eps=eps, ddof=ddof)


def merge(stats: Iterable[GroupStats]) -> GroupStats:
    """Combine the statistics of several ranks (or batches)."""
    parts = list(stats)
    return parts[0].merge(*parts[1:]) if parts else GroupStats()


def normalize_with(values: Any, group_ids: Any, stats: GroupStats, *, eps: float = DEFAULT_EPS, ddof: int = 0) -> Array:
    """``(x - mean_g) / (std_g + eps)`` with mean/std taken from (global) `stats` instead of this batch."""
    _check(eps, ddof)
    x, xp = as_float_array(values)
    if x.shape[0] == 0:
        return x
    codes, keys = group_codes(group_ids, int(x.shape[0]))
    idx = stats.index()
    missing = [k for k in keys if k not in idx]
    if missing:
        raise KeyError(f"group ids {missing[:5]} are not in the statistics (keys: {stats.keys[:10]})")
    rows = np.asarray([idx[k] for k in keys], dtype=np.int64)
    mean = from_numpy(stats.mean()[rows], xp, x)
    std = from_numpy(stats.std(ddof)[rows], xp, x)
    if isinstance(codes, np.ndarray) and not aac.is_numpy_namespace(xp):
        codes = from_numpy(codes, xp, x)
    xa = xp.astype(x, xp.float64, copy=False)
    out = (xa - take(mean, codes)) / (take(std, codes) + eps)
    return xp.astype(out, x.dtype, copy=False)
