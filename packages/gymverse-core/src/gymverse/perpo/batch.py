"""`advantages(batch)`: THE PERPO entry point. Every adapter and the local trainer call it on an `EpisodeBatch`.

The definition (the GymVerse reference): every turn is one transition; its return is the per-turn discounted
return ``G_t = r_t + gamma * G_{t+1}`` within its episode; returns are normalized per env id over the whole
batch, ``A = (G - mean_e) / (std_e + eps)`` (population std), or over one group for the whole batch with
``scope="batch"`` (ReBN). Each model token gets the advantage of the turn that produced it; env tokens get 0.

Which turns count: void rows (`gymverse.failures`: env and generation failures) have no trained token and are
left out of the statistics; with a response mask, a turn with no token in it (cut off by the framework's length
limit) is left out of the statistics too. A row repeating an earlier row's episode id (a framework padding its
batch with copies) gets that row's advantages but counts once in the statistics, as it does in the curriculum.
Frameworks that shard a batch over ranks compute `batch_stats` on each rank, combine them (`GroupStats.merge`, or
an all-reduce of ``to_array(keys)``) and pass ``stats=``: the result equals `advantages` on the concatenation of
every rank's rows.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from gymverse.perpo._xp import Array
from gymverse.perpo.episodes import perpo_stats, perpo_token_advantages, perpo_token_stats, perpo_turn_advantages
from gymverse.perpo.normalize import DEFAULT_EPS
from gymverse.perpo.stats import GroupStats
from gymverse.rollout.batch import EpisodeBatch

BATCH_GROUP = "__batch__"
SCOPES = ("env", "batch")


@dataclass
class BatchAdvantages:
    """PERPO of a batch: per row, each turn's advantage and return; per token when the batch has a mask."""

    turn_advantages: list[np.ndarray]
    turn_returns: list[np.ndarray]
    tokens: Array | None = None  # [B, T] like the batch's response mask (its namespace and device)
    token_returns: Array | None = None


def _copies(batch: EpisodeBatch) -> dict[int, int]:
    """Row -> the earlier row with the same episode id (a padding copy)."""
    first: dict[str, int] = {}
    out: dict[int, int] = {}
    for b, r in enumerate(batch.records):
        if r.episode_id and r.episode_id in first:
            out[b] = first[r.episode_id]
        elif r.episode_id:
            first[r.episode_id] = b
    return out


@dataclass
class _Inputs:
    """What the PERPO math sees of a batch: void rows and padding copies have no turns (they are filled in after)."""

    groups: list[Hashable]
    rewards: list[list[float]]
    ends: list[list[int]]
    computed: np.ndarray  # bool per row: its values come from the math (else 0, or its episode's first row)
    copies: dict[int, int]

    @classmethod
    def of(cls, batch: EpisodeBatch, scope: str) -> _Inputs:
        if scope not in SCOPES:
            raise ValueError(f"PERPO scope must be one of {SCOPES}, got {scope!r}")
        copies = _copies(batch)
        computed = batch.trained
        computed[list(copies)] = False
        groups: list[Hashable] = [r.env_id if scope == "env" else BATCH_GROUP for r in batch.records]
        rewards = [list(r.turn_rewards) if ok else [] for r, ok in zip(batch.records, computed)]
        ends = [list(r.turn_ends) if ok else [] for r, ok in zip(batch.records, computed)]
        return cls(groups, rewards, ends, computed, copies)

    def per_turn(self, values: list[np.ndarray], batch: EpisodeBatch) -> list[np.ndarray]:
        """Per-row turn values: void rows one 0 per turn, copies their episode's."""
        out = [v if ok else np.zeros(len(r.turn_rewards)) for v, r, ok in zip(values, batch.records, self.computed)]
        for b, a in self.copies.items():
            out[b] = out[a]
        return out


def batch_stats(batch: EpisodeBatch, *, gamma: float = 1.0, scope: str = "env") -> GroupStats:
    """This rank's per-group (count, sum, sum of squares) of the returns `advantages` normalizes."""
    x = _Inputs.of(batch, scope)
    if batch.response_mask is None:
        return perpo_stats(x.rewards, x.groups, gamma=gamma)
    return perpo_token_stats(batch.response_mask, x.groups, x.rewards, turn_ends=x.ends, gamma=gamma)


def advantages(
    batch: EpisodeBatch,
    stats: GroupStats | None = None,
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
    scope: str = "env",
) -> BatchAdvantages:
    """PERPO advantages of `batch` (module docstring); `stats`: merged `batch_stats` of every rank."""
    x = _Inputs.of(batch, scope)
    if batch.response_mask is None:
        adv, ret = perpo_turn_advantages(x.rewards, x.groups, gamma=gamma, eps=eps, stats=stats)
        return BatchAdvantages(x.per_turn(adv, batch), x.per_turn(ret, batch))
    out = perpo_token_advantages(
        batch.response_mask, x.groups, x.rewards, turn_ends=x.ends, gamma=gamma, eps=eps, stats=stats
    )
    assert out.turn_advantages is not None and out.turn_returns is not None
    for b, a in x.copies.items():  # a padding copy's tokens: its episode's values on its own model tokens
        on = batch.response_mask[b] != 0
        out.advantages[b] = out.advantages[a] * on
        out.returns[b] = out.returns[a] * on
    return BatchAdvantages(
        x.per_turn(out.turn_advantages, batch), x.per_turn(out.turn_returns, batch), out.advantages, out.returns
    )
