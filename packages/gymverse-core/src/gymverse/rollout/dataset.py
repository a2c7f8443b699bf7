"""One dataset row schema and one seed scheme for every framework's ``make-dataset`` and for `gymverse train`.

A row names one episode: ``{"env_id", "seed", "complexity", "split", "env_index"}`` (`EpisodeSpec`). Each adapter
stores it where its framework carries per-row data (verl and RL2: ``extra_info``; OpenRLHF: the label), so the
same flags give the same (env, seed, level) episodes in every framework. The scheme (`episode_specs`): rows go
round-robin over the env ids, ``n`` rounds, and round ``i`` uses seed ``seed + i`` for every env; ``complexity``
None means the curriculum's level (or the env's default without one). ``split == "val"`` marks validation rows:
played at the curriculum's fixed evaluation level and never recorded in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gymverse.complexity import check_level

SPLITS = ("train", "val")


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode a dataset row asks for (see the module docstring)."""

    env_id: str
    seed: int | None = None
    complexity: int | None = None
    split: str = "train"
    env_index: int = 0  # position of env_id in the dataset's env list (a number frameworks can log)

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"a GymVerse row needs a non-empty string env_id, got {self.env_id!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ValueError(f"GymVerse row {self.env_id}: seed must be an integer or null, got {self.seed!r}")
        if self.complexity is not None:
            check_level(self.complexity)
        if self.split not in SPLITS:
            raise ValueError(f"GymVerse row {self.env_id}: split must be one of {SPLITS}, got {self.split!r}")
        if isinstance(self.env_index, bool) or not isinstance(self.env_index, int) or self.env_index < 0:
            raise ValueError(f"GymVerse row {self.env_id}: env_index must be an int >= 0, got {self.env_index!r}")

    @property
    def validation(self) -> bool:
        """A validation row (fixed evaluation level, not recorded in the curriculum)."""
        return self.split == "val"

    def to_dict(self) -> dict[str, Any]:
        """The row's JSON fields."""
        return {
            "env_id": self.env_id,
            "seed": self.seed,
            "complexity": self.complexity,
            "split": self.split,
            "env_index": self.env_index,
        }

    @classmethod
    def from_dict(cls, data: Any, *, hint: str = "") -> EpisodeSpec:
        """From a row's fields (numpy scalars accepted); a malformed row raises a ValueError naming the problem."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a GymVerse row must be a mapping with env_id and seed, got {data!r:.160}{hint}")
        known = {"env_id", "seed", "complexity", "split", "env_index", "index"}  # "index": verl's row position
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"GymVerse row has unknown field(s) {unknown}; fields: {sorted(known - {'index'})}{hint}")
        values = {k: _plain(data[k]) for k in ("env_id", "seed", "complexity", "split", "env_index") if k in data}
        if "env_id" not in values:
            raise ValueError(f"a GymVerse row needs an env_id, got fields {sorted(data)}{hint}")
        try:
            return cls(**values)
        except ValueError as err:
            raise ValueError(f"{err}{hint}") from None


def _plain(value: Any) -> Any:
    """numpy scalars (how columnar readers hand values over) to Python values."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else value


def episode_specs(
    env_ids: Sequence[str], n: int, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> list[EpisodeSpec]:
    """`n` rows per env id, round-robin over `env_ids`, round ``i`` at seed ``seed + i`` (module docstring)."""
    from gymverse.registry import check_env_ids

    if n < 1:
        raise ValueError(f"--n must be >= 1, got {n}")
    if not env_ids:
        raise ValueError("no env ids given")
    check_env_ids(env_ids)
    if complexity is not None:
        check_level(complexity)
    return [
        EpisodeSpec(env_id, seed + i, complexity, split, index)
        for i in range(n)
        for index, env_id in enumerate(env_ids)
    ]
