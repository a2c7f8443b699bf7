"""Advantages for a step's trajectories, from the core estimators only (no advantage math lives here).

* ``perpo``: `gymverse.perpo.advantages` — per-turn returns normalized per env id (the reference).
* ``rebn``: `gymverse.perpo.advantages` with ``scope="batch"`` — every turn's return ``G_t`` over the whole batch.
* ``grpo`` / ``rloo``: `grpo_advantages` / `rloo_advantages` of each episode's return ``G_0`` within its prompt
  group (same env and seed), copied onto every turn of the episode.

Turn advantages land on the model's tokens of that turn with `gymverse.perpo.place_turn_advantages`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gymverse.perpo import advantages, place_turn_advantages, rloo_advantages, turn_ids_from_mask
from gymverse.perpo import grpo_advantages as _grpo
from gymverse.rollout import EpisodeBatch
from gymverse.trajectory import Trajectory

ALGOS = ("perpo", "grpo", "rebn", "rloo")


def _turn_returns(t: Trajectory, gamma: float) -> list[float]:
    if any(turn.ret is None for turn in t.turns):
        from gymverse.perpo import returns_from_lists

        return [float(g) for g in returns_from_lists([t.rewards], gamma)[0]] if t.turns else []
    return [float(turn.ret) for turn in t.turns if turn.ret is not None]


def _perpo(trajs: Sequence[Trajectory], algo: str, gamma: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-turn and per-token advantages from the one PERPO entry point (``rebn``: one group for the batch)."""
    out = advantages(EpisodeBatch.from_trajectories(trajs), gamma=gamma, scope="env" if algo == "perpo" else "batch")
    tokens = np.asarray(out.tokens)
    lens = [len(t.tokens.response_mask) if t.tokens is not None else 0 for t in trajs]
    return out.turn_advantages, [tokens[b, :n] for b, n in enumerate(lens)]


def turn_advantages(trajs: Sequence[Trajectory], algo: str, *, gamma: float = 1.0) -> list[np.ndarray]:
    """Per trajectory, one advantage per turn."""
    if algo in ("perpo", "rebn"):
        return _perpo(trajs, algo, gamma)[0]
    if algo in ("grpo", "rloo"):
        score = np.asarray([(_turn_returns(t, gamma) or [0.0])[0] for t in trajs], dtype=np.float64)
        groups = [f"{t.env_id}#{t.seed}#{t.complexity}" for t in trajs]
        ep = _grpo(score, groups) if algo == "grpo" else rloo_advantages(score, groups)
        return [np.full(len(t.turns), float(a)) for t, a in zip(trajs, np.asarray(ep))]
    raise ValueError(f"unknown algo {algo!r}; choose one of {', '.join(ALGOS)}")


def token_advantages(
    trajs: Sequence[Trajectory], turn_adv: Sequence[np.ndarray], algo: str, *, gamma: float = 1.0
) -> list[np.ndarray]:
    """Per trajectory, the advantage of every response token (0 on env tokens)."""
    if algo in ("perpo", "rebn"):
        return _perpo(trajs, algo, gamma)[1]
    out = []
    for t, adv in zip(trajs, turn_adv):
        mask = np.asarray(t.tokens.response_mask if t.tokens is not None else [], dtype=np.int64)
        if mask.size == 0 or len(adv) == 0:
            out.append(np.zeros(mask.size))
            continue
        out.append(
            np.asarray(place_turn_advantages(np.asarray(adv)[None], turn_ids_from_mask(mask[None]), mask[None]))[0]
        )
    return out


def assign(trajs: Sequence[Trajectory], algo: str, *, gamma: float = 1.0) -> list[np.ndarray]:
    """Fill ``Turn.advantage`` and return the per-token advantages of each trajectory."""
    if algo in ("perpo", "rebn"):
        turn_adv, tokens = _perpo(trajs, algo, gamma)
    else:
        turn_adv = turn_advantages(trajs, algo, gamma=gamma)
        tokens = token_advantages(trajs, turn_adv, algo, gamma=gamma)
    for t, adv in zip(trajs, turn_adv):
        for turn, a in zip(t.turns, adv):
            turn.advantage = float(a)
    return tokens
