"""Array-namespace plumbing shared by the PERPO math: float promotion, group codes and segment sums.

Everything here works on any array-API namespace (via `array_api_compat`). Scatter-add is not part of the
standard, so `segment_sum` uses the namespace's own kernel when it has one (``np.bincount`` for numpy,
``Tensor.index_add_`` for torch, reached through the tensor's methods so torch is never imported here) and a
sort + cumulative-sum fallback that needs only standard functions otherwise.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import array_api_compat as aac
import numpy as np

Array = Any  # an array of any array-API namespace (numpy ndarray, torch Tensor, ...)

_FORCE_GENERIC = False


@contextmanager
def generic_kernels() -> Iterator[None]:
    """Use the standard-only segment kernels for every namespace (tests and benchmarks of that path)."""
    global _FORCE_GENERIC
    old, _FORCE_GENERIC = _FORCE_GENERIC, True
    try:
        yield
    finally:
        _FORCE_GENERIC = old


def namespace(*arrays: Array) -> Any:
    """The array-API namespace of `arrays` (numpy for lists and scalars)."""
    real = [a for a in arrays if a is not None and not isinstance(a, list | tuple | int | float)]
    return aac.array_namespace(*real) if real else aac.array_namespace(np.empty(0))


def as_float_array(x: Any, what: str = "values") -> tuple[Array, Any]:
    """`x` as a 1-D floating array of its own namespace (lists become float64 numpy), plus the namespace."""
    if isinstance(x, list | tuple):
        x = np.asarray(x, dtype=np.float64)
    xp = aac.array_namespace(x)
    if len(x.shape) != 1:
        raise ValueError(f"{what} must be 1-D (one entry per transition), got shape {tuple(x.shape)}")
    if not xp.isdtype(x.dtype, "real floating"):
        x = xp.astype(x, xp.float64)
    return x, xp


def to_numpy(x: Array) -> np.ndarray:
    """A host numpy copy of a (small) array from any namespace."""
    if isinstance(x, np.ndarray):
        return x
    return np.asarray(aac.to_device(x, "cpu")) if aac.is_torch_array(x) else np.asarray(x)


def from_numpy(x: np.ndarray, xp: Any, like: Array) -> Array:
    """`x` moved into namespace `xp` on the device of `like`."""
    if aac.is_numpy_namespace(xp):
        return x
    return xp.asarray(x, device=aac.device(like))


def _dense_int_codes(ids: np.ndarray) -> tuple[np.ndarray, list[Hashable]]:
    # Small non-negative ints (env indices) map through a presence table: O(n), no sort.
    lo, hi = int(ids.min()), int(ids.max())
    if lo >= 0 and hi < 4 * ids.size + 1024:
        present = np.bincount(ids, minlength=hi + 1) > 0
        remap = np.cumsum(present) - 1
        uniques = np.flatnonzero(present)
        return remap[ids].astype(np.int64), [int(u) for u in uniques]
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), [int(u) for u in uniq]


def _xp_int_codes(ids: Array, xp: Any) -> tuple[Array, list[Hashable]]:
    # Same presence-table trick on the ids' own device; unique_inverse sorts and is ~50x slower in torch.
    if ids.shape[0] == 0:
        return xp.astype(ids, xp.int64), []
    ids = xp.astype(ids, xp.int64, copy=False)
    lo, hi = int(xp.min(ids)), int(xp.max(ids))
    if lo >= 0 and hi < 4 * ids.shape[0] + 1024:
        like = xp.zeros(1, dtype=xp.float32, device=aac.device(ids))
        present = segment_count(ids, hi + 1, like) > 0
        remap = xp.cumulative_sum(xp.astype(present, xp.int64)) - 1
        uniques = to_numpy(xp.nonzero(present)[0]).tolist()
        return take(remap, ids), [int(u) for u in uniques]
    uniq, inv = xp.unique_inverse(ids)
    return xp.astype(inv, xp.int64), [int(u) for u in to_numpy(uniq).tolist()]


def take(values: Array, indices: Array) -> Array:
    """``values[indices]`` along axis 0 (torch through ``index_select``: compat's ``take`` is ~10x slower)."""
    if aac.is_torch_array(values):
        return values.index_select(0, indices)
    return aac.array_namespace(values).take(values, indices)


def group_codes(keys: Any, n: int) -> tuple[np.ndarray | Array, list[Hashable]]:
    """Dense integer codes for group keys (strings, ints or an int array), plus the keys in code order.

    Keys are sorted (when comparable) so codes do not depend on the order transitions arrive in. An integer
    array of a non-numpy namespace keeps its namespace and device; host keys produce numpy codes.
    """
    if isinstance(keys, np.ndarray) or not (isinstance(keys, Sequence) or aac.is_array_api_obj(keys)):
        keys = np.asarray(keys)
    if aac.is_array_api_obj(keys) and not isinstance(keys, np.ndarray):
        xp = aac.array_namespace(keys)
        if not xp.isdtype(keys.dtype, "integral"):
            raise TypeError(f"array group ids must be integers, got dtype {keys.dtype}")
        if keys.shape != (n,):
            raise ValueError(f"group ids must have shape ({n},), got {tuple(keys.shape)}")
        return _xp_int_codes(keys, xp)
    if isinstance(keys, np.ndarray):
        if keys.shape != (n,):
            raise ValueError(f"group ids must have shape ({n},), got {tuple(keys.shape)}")
        if n == 0:
            return np.zeros(0, dtype=np.int64), []
        if keys.dtype.kind in "iu":
            return _dense_int_codes(keys)
        if keys.dtype.kind in "USb":
            uniq, inv = np.unique(keys, return_inverse=True)
            return inv.astype(np.int64).reshape(-1), [u.item() for u in uniq]
        keys = keys.tolist()
    if len(keys) != n:
        raise ValueError(f"got {len(keys)} group ids for {n} values")
    # A dict pass is much faster than np.unique on Python strings; sort the few uniques afterwards.
    index: dict[Hashable, int] = {}
    raw = np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=n)
    found = list(index)
    try:
        order = sorted(range(len(found)), key=lambda i: found[i])  # type: ignore[arg-type,return-value]
    except TypeError:  # mixed key types: first-appearance order is still deterministic for a fixed batch
        order = list(range(len(found)))
    rank = np.empty(len(found), dtype=np.int64)
    rank[order] = np.arange(len(found), dtype=np.int64)
    return rank[raw], [found[i] for i in order]


def segment_sum(x: Array, codes: Array, num_groups: int, impl: Literal["auto", "generic"] = "auto") -> Array:
    """Per-group sums ``out[g] = sum(x[codes == g])`` in `x`'s namespace and dtype."""
    xp = aac.array_namespace(x)
    if _FORCE_GENERIC:
        impl = "generic"
    if impl == "auto" and aac.is_numpy_namespace(xp):
        return np.bincount(codes, weights=x, minlength=num_groups).astype(x.dtype, copy=False)
    if impl == "auto" and aac.is_torch_namespace(xp):
        out = xp.zeros(num_groups, dtype=x.dtype, device=aac.device(x))
        return out.index_add_(0, codes, x)
    # Standard-only fallback: sort by group, prefix-sum, difference at the group boundaries.
    order = xp.argsort(codes, stable=True)
    sorted_codes = take(codes, order)
    prefix = xp.cumulative_sum(take(x, order), include_initial=True)
    edges = xp.searchsorted(sorted_codes, xp.arange(num_groups + 1, dtype=codes.dtype, device=aac.device(x)))
    return take(prefix, edges[1:]) - take(prefix, edges[:-1])


def segment_count(codes: Array, num_groups: int, like: Array) -> Array:
    """Per-group counts as a float array of `like`'s namespace and dtype."""
    xp = aac.array_namespace(like)
    if not _FORCE_GENERIC and aac.is_numpy_namespace(xp):
        return np.bincount(codes, minlength=num_groups).astype(like.dtype)
    if not _FORCE_GENERIC and aac.is_torch_array(codes):
        return xp.astype(codes.bincount(minlength=num_groups), like.dtype)
    return segment_sum(xp.ones(codes.shape, dtype=like.dtype, device=aac.device(like)), codes, num_groups)
