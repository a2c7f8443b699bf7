"""One trajectory JSONL line as the viewer indexes it: parsed defensively, summarized into the list's columns."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import numpy as np

_INT64 = np.iinfo(np.int64)


class RecordSummary(NamedTuple):
    """The indexed fields of one trajectory record."""

    env_id: str
    seed: int | None
    complexity: int
    turns: int
    total: float
    success: bool
    error: str | None
    step: int | None
    format_errors: int
    truncated: bool
    policy: str | None
    texts: list[str]


def load_record(line: bytes) -> Any:
    """One JSONL line as Python, or ValueError (also for nesting too deep to parse). NaN and Infinity are read: the
    trajectory writer emits them for an env's non-finite rewards, and the viewer shows them."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def _int64(value: Any, name: str) -> int:
    if not _INT64.min < value <= _INT64.max:  # the minimum is the "missing" marker of the seed and step columns
        raise ValueError(f"{name} {value} is out of the 64-bit range")
    return int(value)


def _opt_int(value: Any, name: str) -> int | None:
    return _int64(value, name) if isinstance(value, int) and not isinstance(value, bool) else None


def policy_of(rec: dict[str, Any]) -> str | None:
    """Which policy played the episode: ``metrics["policy"]`` (what `gymverse evaluate` records) or ``policy``."""
    metrics = rec.get("metrics")
    value = metrics.get("policy") if isinstance(metrics, dict) else None
    value = rec.get("policy") if value is None else value
    return value if isinstance(value, str) and value else None


def summarize_record(rec: Any) -> RecordSummary:
    """The indexed fields of one trajectory record, or ValueError naming what is wrong with it."""
    if not isinstance(rec, dict):
        raise ValueError(f"expected a JSON object, got {type(rec).__name__}")
    env_id = rec.get("env_id")
    turns = rec.get("turns", [])
    if not isinstance(env_id, str) or not isinstance(turns, list):
        raise ValueError("not a trajectory record: needs a string 'env_id' and a list 'turns'")
    texts: list[str] = []
    total = 0.0
    format_errors = 0
    for k, t in enumerate(turns):
        if not isinstance(t, dict):
            raise ValueError(f"turn {k} is a {type(t).__name__}, not an object")
        total += float(t.get("reward") or 0.0)
        info = t.get("info")
        if isinstance(info, dict) and info.get("format_error"):
            format_errors += 1
        texts.append(str(t.get("observation", "")))
        texts.append(str(t.get("action", "")))
    texts.append(str(rec.get("final_observation", "")))
    metrics = rec.get("metrics")
    error = rec.get("error")
    return RecordSummary(
        env_id=env_id,
        seed=_opt_int(rec.get("seed"), "seed"),
        complexity=_int64(int(rec.get("complexity") or 0), "complexity"),
        turns=len(turns),
        total=total,
        success=rec.get("success") is True,
        error=None if error in (None, "") else str(error),
        step=_opt_int(metrics.get("step") if isinstance(metrics, dict) else None, "metrics.step"),
        format_errors=format_errors,
        truncated=bool(rec.get("truncated", False)),
        policy=policy_of(rec),
        texts=texts,
    )


__all__ = ["RecordSummary", "load_record", "policy_of", "summarize_record"]
