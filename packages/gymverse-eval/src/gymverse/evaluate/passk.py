"""Unbiased pass@k and the small statistics the difficulty report needs (slope, Spearman, buckets).

pass@k is the probability that at least one of `k` samples drawn without replacement from `n` attempts (of which
`c` succeeded) is a success: ``1 - C(n-c, k) / C(n, k)``. Plugging the empirical rate into ``1 - (1-c/n)^k`` is
biased (it overestimates pass@k for small n); the closed form is unbiased. We evaluate the ratio of binomials as a
product, ``prod_{i=n-c+1}^{n} (1 - k/i)``, which never forms huge integers and is exact up to float rounding.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate from `n` attempts with `c` successes (requires ``0 <= c <= n`` and ``1 <= k <= n``)."""
    if n < 1:
        raise ValueError(f"pass@k needs at least one attempt, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"successes must be in 0..n={n}, got c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n={n}, got k={k}")
    if n - c < k:  # every k-subset contains a success
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k_exact(n: int, c: int, k: int) -> float:
    """The same quantity through exact integer binomials (reference for tests and small n)."""
    if not (n >= 1 and 0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"invalid pass@k arguments n={n}, c={c}, k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_enumerate(outcomes: Sequence[bool], k: int) -> float:
    """pass@k by enumerating every k-subset of `outcomes` (exponential; for verifying the closed form only)."""
    subsets = list(itertools.combinations(range(len(outcomes)), k))
    if not subsets:
        raise ValueError(f"k={k} exceeds the number of outcomes {len(outcomes)}")
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


def ks_for(n: int, requested: Sequence[int]) -> list[int]:
    """The requested k values that are valid for `n` attempts (k <= n), sorted and without repeats."""
    return sorted({k for k in requested if 1 <= k <= n})


def least_squares_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Slope of the least-squares line through (xs, ys); None with fewer than two distinct x values."""
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if x.size != y.size:
        raise ValueError(f"xs and ys differ in length ({x.size} vs {y.size})")
    if x.size < 2 or np.ptp(x) == 0:
        return None
    dx = x - x.mean()
    return float(np.dot(dx, y - y.mean()) / np.dot(dx, dx))


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties sharing their average rank (what Spearman's rho needs)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    sorted_vals = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman rank correlation; None when either side is constant (rho is undefined there)."""
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if x.size != y.size:
        raise ValueError(f"xs and ys differ in length ({x.size} vs {y.size})")
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    return float(np.dot(rx, ry) / math.sqrt(float(np.dot(rx, rx) * np.dot(ry, ry))))


__all__ = ["ks_for", "least_squares_slope", "pass_at_k", "pass_at_k_enumerate", "pass_at_k_exact", "spearman"]
