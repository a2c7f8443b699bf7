"""The viewer's list query (filters, sort) parsed from URL parameters, and the summary panels computed for a mask."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

#: Column value of an episode without a training step / without a recorded policy.
NO_STEP = np.iinfo(np.int64).min
NO_POLICY = -1


class IndexColumns(Protocol):
    """The columns of `gymverse.viewer.index.TrajectoryIndex` the summary panels read (one row per episode)."""

    env: np.ndarray
    env_names: list[str]
    policy: np.ndarray
    policy_names: list[str]
    complexity: np.ndarray
    ret: np.ndarray
    success: np.ndarray
    has_error: np.ndarray
    step: np.ndarray
    format_errors: np.ndarray


SORT_KEYS = (
    "id",
    "env",
    "policy",
    "seed",
    "complexity",
    "turns",
    "return",
    "success",
    "error",
    "step",
    "format_errors",
)
HIST_BINS = 30
MAX_STEP_POINTS = 200
MAX_PAGE = 1000


@dataclass(frozen=True)
class Query:
    """Which episodes to list and in which order; every field None/empty means "no filter"."""

    envs: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    cmin: int | None = None
    cmax: int | None = None
    success: bool | None = None
    error: bool | None = None
    format_error: bool | None = None
    text: str = ""
    sort: str = "id"
    descending: bool = False


def _int(params: Mapping[str, str], name: str) -> int | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def _flag(params: Mapping[str, str], name: str) -> bool | None:
    raw = params.get(name, "").strip().lower()
    if raw in ("", "any"):
        return None
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    raise ValueError(f"{name} must be 1, 0 or any, got {raw!r}")


def parse_query(params: Mapping[str, str]) -> tuple[Query, int, int]:
    """``(query, offset, limit)`` from URL parameters; a bad value raises ValueError naming the parameter."""
    sort = params.get("sort", "id") or "id"
    if sort not in SORT_KEYS:
        raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")
    envs = tuple(e for e in params.get("env", "").split(",") if e)
    offset = _int(params, "offset") or 0
    limit = _int(params, "limit")
    limit = 100 if limit is None else limit
    if offset < 0 or not 0 <= limit <= MAX_PAGE:
        raise ValueError(f"need offset >= 0 and 0 <= limit <= {MAX_PAGE}, got offset={offset} limit={limit}")
    q = Query(
        envs=envs,
        policies=tuple(p for p in params.get("policy", "").split(",") if p),
        cmin=_int(params, "cmin"),
        cmax=_int(params, "cmax"),
        success=_flag(params, "success"),
        error=_flag(params, "error"),
        format_error=_flag(params, "format_error"),
        text=params.get("q", ""),
        sort=sort,
        descending=_flag(params, "desc") is True,
    )
    return q, offset, limit


def _success_by_complexity(index: IndexColumns, m: np.ndarray) -> dict[str, list[list[float]]]:
    env, cx, ok = index.env[m], index.complexity[m], index.success[m]
    if env.size == 0:
        return {}
    base = int(cx.min())
    key = env.astype(np.int64) * (int(cx.max()) - base + 1) + (cx - base)
    keys, inv = np.unique(key, return_inverse=True)
    n = np.bincount(inv)
    wins = np.bincount(inv, weights=ok.astype(np.float64))
    out: dict[str, list[list[float]]] = {}
    width = int(cx.max()) - base + 1
    for k, cnt, w in zip(keys.tolist(), n.tolist(), wins.tolist()):
        name = index.env_names[k // width]
        out.setdefault(name, []).append([k % width + base, cnt, w / cnt])
    return dict(sorted(out.items()))


def _success_by_policy(index: IndexColumns, m: np.ndarray) -> dict[str, list[float]]:
    """``{policy: [episodes, success rate]}``: a headline rate that mixes oracle and random play means nothing."""
    pol, ok = index.policy[m], index.success[m]
    out: dict[str, list[float]] = {}
    for code in np.unique(pol).tolist():
        sel = pol == code
        name = "(unrecorded)" if code == NO_POLICY else index.policy_names[code]
        out[name] = [int(sel.sum()), float(ok[sel].mean())]
    return dict(sorted(out.items()))


def _complexity_by_step(index: IndexColumns, m: np.ndarray) -> dict[str, list[list[float]]]:
    m = m & (index.step != NO_STEP)
    if not m.any():
        return {}
    env, step, cx = index.env[m], index.step[m], index.complexity[m]
    lo, hi = int(step.min()), int(step.max())
    width = max(1, -(-(hi - lo + 1) // MAX_STEP_POINTS))  # bucket steps so a long run stays <= 200 points
    bucket = (step - lo) // width
    nb = int(bucket.max()) + 1
    keys, inv = np.unique(env.astype(np.int64) * nb + bucket, return_inverse=True)
    n = np.bincount(inv)
    mean = np.bincount(inv, weights=cx.astype(np.float64)) / n
    out: dict[str, list[list[float]]] = {}
    for k, cnt, mu in zip(keys.tolist(), n.tolist(), mean.tolist()):
        out.setdefault(index.env_names[k // nb], []).append([lo + (k % nb) * width, mu, cnt])
    return dict(sorted(out.items()))


def summarize(index: IndexColumns, m: np.ndarray) -> dict[str, Any]:
    """Summary panels for the selected episodes: counts, success by complexity, complexity by step, returns."""
    ret = index.ret[m]
    finite = ret[np.isfinite(ret)]  # a diverged (NaN/inf) reward must not blank the histogram
    hist: dict[str, list[float]] = {"edges": [], "counts": []}
    if finite.size:
        counts, edges = np.histogram(finite, bins=HIST_BINS)
        hist = {"edges": edges.tolist(), "counts": counts.tolist()}
    n = int(m.sum())
    return {
        "episodes": n,
        "success_rate": float(index.success[m].mean()) if n else None,
        "success_by_policy": _success_by_policy(index, m),
        "errors": int(index.has_error[m].sum()),
        "format_error_turns": int(index.format_errors[m].sum()),
        "mean_return": float(finite.mean()) if finite.size else None,
        "success_by_complexity": _success_by_complexity(index, m),
        "complexity_by_step": _complexity_by_step(index, m),
        "return_histogram": hist,
    }


__all__ = ["MAX_PAGE", "SORT_KEYS", "Query", "parse_query", "summarize"]
