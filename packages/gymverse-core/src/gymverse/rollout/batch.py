"""`EpisodeBatch`: the batch boundary. What leaves core for a framework's trainer, and what PERPO reads back.

An adapter turns each finished `Trajectory` into one `EpisodeRecord` (env id, per-turn rewards, turn ends, level,
stop reason, success, episode id), carries it through its framework's per-sample side channel unchanged (verl's
``extra_fields``, OpenRLHF's label, RL2's sample record, oat's transitions) with ``to_dict`` / ``from_dict``,
and on the trainer side builds an `EpisodeBatch` of the rows the framework hands it (plus the framework's
``[B, T]`` response mask) for the one PERPO entry point, `gymverse.perpo.advantages`.

``turn_ends[k]`` is the exclusive end of turn ``k``'s model tokens in the response. A framework that cuts a
sequence at its length limit cuts the mask, not the record: a turn whose tokens are all past the cut has an end
past the mask's width, so it has no trained token and is left out of the statistics (its reward still flows
into the returns of the turns before it). Whether a row is trained at all is its stop reason's
(`gymverse.failures`): void rows keep their place in the batch with no trained token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gymverse.curriculum.state import EpisodeOutcome
from gymverse.failures import VOID_STOPS, check_stop_reason, is_trained
from gymverse.trajectory import Trajectory

_FIELDS = ("env_id", "turn_rewards", "turn_ends", "stop_reason", "level", "success", "episode_id", "seed")


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode as the trainer side sees it (JSON-safe; see the module docstring)."""

    env_id: str
    turn_rewards: tuple[float, ...]
    turn_ends: tuple[int, ...]
    stop_reason: str = "terminated"
    level: int = 0
    success: bool = False
    episode_id: str = ""
    seed: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise ValueError(f"episode record needs a non-empty string env_id, got {self.env_id!r}")
        check_stop_reason(self.stop_reason)
        if len(self.turn_ends) != len(self.turn_rewards):
            raise ValueError(
                f"{self.env_id}: {len(self.turn_ends)} turn ends for {len(self.turn_rewards)} turn rewards"
            )
        if any(e < 0 for e in self.turn_ends) or list(self.turn_ends) != sorted(self.turn_ends):
            raise ValueError(f"{self.env_id}: turn ends must be >= 0 and increasing, got {list(self.turn_ends)}")

    @property
    def trained(self) -> bool:
        """Whether the episode contributes trained tokens (`gymverse.failures`)."""
        return is_trained(self.stop_reason)

    @property
    def void(self) -> bool:
        """An env or generation failure: not trained, not a curriculum success or failure."""
        return self.stop_reason in VOID_STOPS

    @classmethod
    def of(cls, traj: Trajectory) -> EpisodeRecord:
        """The record of a finished episode from `gymverse.rollout.run_episode`."""
        if traj.tokens is None:
            raise ValueError(f"{traj.env_id}: trajectory has no token record; collect it with gymverse.rollout")
        return cls(
            traj.env_id,
            tuple(float(r) for r in traj.rewards),
            tuple(int(e) for e in traj.tokens.turn_ends),
            traj.stop_reason or "terminated",
            int(traj.complexity),
            bool(traj.success),
            traj.episode_id,
            traj.seed,
        )

    @classmethod
    def single_turn(cls, group: str, reward: float, end: int) -> EpisodeRecord:
        """A row that is not a GymVerse episode (e.g. a plain prompt): one turn over its first `end` tokens."""
        return cls(group, (float(reward),), (int(end),))

    def outcome(self) -> EpisodeOutcome:
        """What the curriculum records of this episode (void episodes are flagged and left out)."""
        if not self.episode_id:
            raise ValueError(f"{self.env_id}: record has no episode_id; curricula count each episode once by it")
        return EpisodeOutcome(self.episode_id, self.env_id, self.success, self.void)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (lists, no tuples): what a side channel carries."""
        return {
            "env_id": self.env_id,
            "turn_rewards": list(self.turn_rewards),
            "turn_ends": list(self.turn_ends),
            "stop_reason": self.stop_reason,
            "level": self.level,
            "success": self.success,
            "episode_id": self.episode_id,
            "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        """Inverse of `to_dict`; a malformed record raises a ValueError naming the field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"episode record must be a mapping, got {type(data).__name__}")
        missing = [k for k in ("env_id", "turn_rewards", "turn_ends") if k not in data]
        unknown = sorted(set(data) - set(_FIELDS))
        if missing or unknown:
            raise ValueError(f"episode record: missing {missing}, unknown {unknown} (fields: {list(_FIELDS)})")
        try:
            rewards = tuple(float(r) for r in data["turn_rewards"])
            ends = tuple(_int(e, "turn_ends") for e in data["turn_ends"])
            seed = data.get("seed")
            return cls(
                str(data["env_id"]),
                rewards,
                ends,
                str(data.get("stop_reason", "terminated")),
                _int(data.get("level", 0), "level"),
                bool(data.get("success", False)),
                str(data.get("episode_id", "")),
                None if seed is None else _int(seed, "seed"),
            )
        except TypeError as err:
            raise ValueError(f"episode record {data.get('env_id')!r}: {err}") from None


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"episode record: {name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class EpisodeBatch:
    """Rows of a training batch, aligned with the framework's ``[B, T]`` response mask when it has one."""

    records: tuple[EpisodeRecord, ...]
    response_mask: Any = None  # [B, T] numpy or torch, 1 on model tokens; None: per-turn values only

    def __post_init__(self) -> None:
        if self.response_mask is not None:
            shape = tuple(self.response_mask.shape)
            if len(shape) != 2 or shape[0] != len(self.records):
                raise ValueError(f"response_mask must be [B, T] with B = {len(self.records)} rows, got {shape}")

    def __len__(self) -> int:
        return len(self.records)

    @classmethod
    def of(cls, records: Sequence[EpisodeRecord], response_mask: Any = None) -> EpisodeBatch:
        """A batch of `records` (a list is fine)."""
        return cls(tuple(records), response_mask)

    @classmethod
    def from_trajectories(cls, trajectories: Sequence[Trajectory]) -> EpisodeBatch:
        """Records of `trajectories` with their own response masks, right-padded with 0."""
        records = [EpisodeRecord.of(t) for t in trajectories]
        width = max([0, *(len(t.tokens.response_mask) for t in trajectories if t.tokens is not None)])
        mask = np.zeros((len(records), width), dtype=np.int64)
        for b, t in enumerate(trajectories):
            m = t.tokens.response_mask if t.tokens is not None else []
            mask[b, : len(m)] = m
        return cls(tuple(records), mask)

    @property
    def env_ids(self) -> list[str]:
        """Env id per row."""
        return [r.env_id for r in self.records]

    @property
    def turn_rewards(self) -> list[list[float]]:
        """Per-turn rewards per row."""
        return [list(r.turn_rewards) for r in self.records]

    @property
    def turn_ends(self) -> list[list[int]]:
        """Turn ends per row."""
        return [list(r.turn_ends) for r in self.records]

    @property
    def levels(self) -> list[int]:
        """Complexity level per row."""
        return [r.level for r in self.records]

    @property
    def stop_reasons(self) -> list[str]:
        """Stop reason per row."""
        return [r.stop_reason for r in self.records]

    @property
    def trained(self) -> np.ndarray:
        """Bool per row: whether it has trained tokens (`gymverse.failures`)."""
        return np.fromiter((r.trained for r in self.records), dtype=bool, count=len(self.records))

    def outcomes(self) -> list[EpisodeOutcome]:
        """Curriculum outcomes of the GymVerse rows (rows without an episode id are not episodes)."""
        return [r.outcome() for r in self.records if r.episode_id]
