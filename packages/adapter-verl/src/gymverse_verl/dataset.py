"""Training rows verl reads: one row per episode (env id, seed, complexity), written as parquet.

verl's ``RLHFDataset`` needs a chat ``prompt`` column; the agent loop ignores it (the env's first observation is
the real prompt), so it carries a one-line placeholder. ``agent_name`` routes the row to `GymVerseAgentLoop`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from gymverse_verl import AGENT_NAME


def make_rows(
    env_ids: Sequence[str],
    n: int,
    *,
    seed: int = 0,
    complexity: int | Mapping[str, int] | None = 1,
    split: str = "train",
) -> list[dict[str, Any]]:
    """`n` rows per env id with distinct seeds drawn from `seed` (same arguments, same rows)."""
    from gymverse.complexity import check_level
    from gymverse.registry import check_env_ids

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    check_env_ids(env_ids)
    rng = np.random.default_rng(seed)
    seeds = rng.choice(2**31 - 1, size=n * len(env_ids), replace=False)
    rows: list[dict[str, Any]] = []
    for i, env_id in enumerate(env_ids):
        level = complexity.get(env_id, 1) if isinstance(complexity, Mapping) else complexity
        if level is not None:
            check_level(level)
        for j in range(n):
            idx = i * n + j
            rows.append(
                {
                    "data_source": env_id,
                    "agent_name": AGENT_NAME,
                    "prompt": [{"role": "user", "content": f"GymVerse episode: {env_id}"}],
                    "extra_info": {
                        "env_id": env_id,
                        "seed": int(seeds[idx]),
                        "complexity": level,
                        "index": idx,
                        "split": split,
                    },
                }
            )
    return rows


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str) -> None:
    """Write rows as parquet (pandas + pyarrow, both verl dependencies)."""
    import pandas as pd

    if not rows:
        raise ValueError("no rows to write")
    pd.DataFrame(list(rows)).to_parquet(path, index=False)


def check_split(rows: Iterable[tuple[Any, Any]], *, validation: bool, files: Any) -> None:
    """Fail if GymVerse rows (``(agent_name, extra_info)`` pairs) are in the wrong dataset for their split.

    The agent loop runs a row at the fixed evaluation level, without recording it in the curriculum, exactly
    when ``extra_info.split == "val"``; a validation row without it would be played at the evolving training level
    and counted as a training episode, a training row with it would never move the curriculum.
    """
    wrong, total, first = 0, 0, None
    for i, (agent, extra) in enumerate(rows):
        if agent != AGENT_NAME:
            continue
        total += 1
        split = extra.get("split") if isinstance(extra, Mapping) else None
        if (split == "val") != validation:
            wrong += 1
            first = (i, split) if first is None else first
    if not wrong:
        return
    assert first is not None
    where = f"{wrong} of {total} GymVerse rows (first: row {first[0]}, extra_info.split={first[1]!r})"
    if validation:
        raise ValueError(
            f"data.val_files={files}: {where} lack extra_info.split='val', so they would run at the evolving "
            "training level and be recorded as training episodes; write the validation set with "
            "`gymverse-verl make-dataset ... --split val`"
        )
    raise ValueError(
        f"data.train_files={files}: {where} have extra_info.split='val', so they would run at the fixed evaluation "
        "level and never move the curriculum; write training rows without `--split val`"
    )
