"""Sample trajectories for the viewer's tests, benchmark and demos: built-in envs played by a noisy oracle.

Every record comes from the real pipeline pieces: envs from the registry, complexity from a `ComplexityController`
updated after each batch (so complexity moves over ``metrics["step"]``), returns from `fill_returns` and per-turn
PERPO advantages from `env_normalize` over each batch. The policy is the env's oracle wrapped in a little
reasoning text, a random move with probability `noise`, and unboxed text (a format error) with `format_noise`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from gymverse.curriculum.complexity import ComplexityController
from gymverse.perpo import env_normalize, fill_returns
from gymverse.play import play
from gymverse.registry import make
from gymverse.trajectory import Trajectory, Turn

SAMPLE_ENVS = ("game:GuessTheNumber", "game:Mastermind", "game:LightsOut")
_THOUGHTS = (
    "Let me think about what the last observation rules out.",
    "Narrowing down: the feedback eliminates most of the remaining candidates.",
    "I will follow the plan from the previous turn.",
    "Trying the most informative move next.",
)


def _act(env: object, rng: np.random.Generator, noise: float, format_noise: float) -> str:
    u = rng.random()
    thought = _THOUGHTS[int(rng.integers(len(_THOUGHTS)))]
    if u < format_noise:
        return f"{thought} My answer is {int(rng.integers(100))}."  # no \boxed{}: a format error
    move = env.sample_random_action() if u < format_noise + noise else env.solve()  # type: ignore[attr-defined]
    return f"{thought}\n{move}"


def _recorder(turns: list[Turn]) -> Callable[[str, str, Any], None]:
    """A `play` step hook that keeps each step as a `Turn` in `turns`."""
    return lambda obs, action, res: turns.append(Turn(obs, action, res.reward, dict(res.info)))


def sample_trajectories(
    steps: int,
    episodes_per_step: int,
    env_ids: Sequence[str] = SAMPLE_ENVS,
    *,
    seed: int = 0,
    noise: float = 0.25,
    format_noise: float = 0.05,
) -> Iterator[Trajectory]:
    """`steps` batches of `episodes_per_step` episodes (envs round-robin), each record tagged ``metrics["step"]``."""
    rng = np.random.default_rng(seed)
    controller = ComplexityController()
    envs = {eid: make(eid) for eid in env_ids}
    try:
        for step in range(steps):
            batch = []
            for k in range(episodes_per_step):
                eid = env_ids[k % len(env_ids)]
                env = envs[eid]
                ep_seed = seed * 1_000_003 + step * episodes_per_step + k
                turns: list[Turn] = []
                played = play(
                    env,
                    lambda e, _obs: _act(e, rng, noise, format_noise),
                    seed=ep_seed,
                    complexity=controller.level(eid),
                    on_step=_recorder(turns),
                ).reraise()
                obs, info = played.start
                traj = Trajectory(eid, ep_seed, int(info["complexity"]), turns=turns, metrics={"step": step})
                traj.final_observation = played.steps[-1].observation if played.steps else obs
                if played.done:
                    last = played.steps[-1]
                    traj.success = played.success
                    traj.truncated = last.truncated and not last.terminated
                traj.metrics["turns"] = len(traj.turns)
                batch.append(traj)
            fill_returns(batch)
            codes = np.asarray([env_ids.index(t.env_id) for t in batch for _ in t.turns])
            rets = np.asarray([turn.ret for t in batch for turn in t.turns], dtype=np.float64)
            adv = iter(np.asarray(env_normalize(rets, codes)).tolist())
            for t in batch:
                for turn in t.turns:
                    turn.advantage = next(adv)
            controller.update_from_trajectories(batch)
            yield from batch
    finally:
        for env in envs.values():
            env.close()


__all__ = ["SAMPLE_ENVS", "sample_trajectories"]
