"""Dataset export in RL2's format: JSONL rows naming one episode each, read by RL2's ``RLDataset``.

Both RL2 APIs hand a row's ``extra_info`` to the rollout untouched, so a row is the core's `EpisodeSpec`::

    {"extra_info": {"env_id": "games:GuessTheNumber", "seed": 17, "complexity": null, "split": "train", ...}}

(no ``prompt``: the first observation comes from the env's reset, at the curriculum's level when evolving), with
the core's seed scheme (`gymverse.rollout.episode_specs`). Pass the file as ``train_data.path`` (0.0.2) or
``rollout.train.path`` (head).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from gymverse.rollout import episode_specs


def dataset_rows(
    env_ids: Sequence[str], n: int, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> Iterator[dict[str, Any]]:
    """`n` rows per env (`episode_specs`), each as RL2's ``{"extra_info": ...}``."""
    for spec in episode_specs(env_ids, n, seed=seed, complexity=complexity, split=split):
        yield {"extra_info": spec.to_dict()}


def write_dataset(
    env_ids: Sequence[str], n: int, out: str, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> int:
    """Write `dataset_rows` to the JSONL file `out`; returns the number of rows."""
    rows = list(dataset_rows(env_ids, n, seed=seed, complexity=complexity, split=split))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return len(rows)
