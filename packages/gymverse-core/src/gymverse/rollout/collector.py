"""`RolloutCollector`: the one multi-turn rollout loop every adapter builds on.

Per `collect` call (one training step's batch):

1. Each session gets its env's level from the `ComplexityController` (``set_complexity`` before ``reset``, so
   it lands on the base env under any wrappers) and is reset with its seed. The level the env reports back
   (``info["complexity"]``) is what the trajectory records; if it differs from the controller's, the collector
   raises instead of silently training at the wrong level.
2. Turns run in lockstep: the prompts of all unfinished episodes go to one ``await generate(prompts)`` call
   and every session steps concurrently. An episode ends when the env terminates or truncates, or after
   ``horizon.horizon()`` turns (then ``truncated=True`` and ``metrics["horizon_truncated"] = True``). A session
   whose reset or step raises (or that ends an episode with ``info["error"]``) ends only its own episode
   (``error`` set; ``complexity`` is the requested level, 0 without a controller, when the reset failed).
3. Returns ``G_t`` fill every ``Turn.ret``; then, unless ``update_curricula=False``, the controller is updated
   from the episodes' ``success`` (episodes with an ``error`` are infrastructure failures and are left out) and
   the horizon schedule advances one step with the batch's success rate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum.complexity import ComplexityController, LevelChange
from gymverse.curriculum.horizon import HorizonSchedule
from gymverse.perpo.returns import fill_returns
from gymverse.rollout.formatting import Formatter, History, HistoryFormatter
from gymverse.rollout.session import EnvSessionLike
from gymverse.trajectory import Trajectory, Turn

Generate = Callable[[list[Any]], Awaitable[list[str]]]


@dataclass
class _Episode:
    session: EnvSessionLike
    traj: Trajectory
    history: History
    done: bool = False
    last_info: dict[str, Any] = field(default_factory=dict)


class RolloutCollector:
    """Collects `Trajectory` records from env sessions with an async text generator."""

    def __init__(
        self,
        generate: Generate,
        formatter: Formatter | None = None,
        *,
        controller: ComplexityController | None = None,
        horizon: HorizonSchedule | None = None,
        gamma: float = 1.0,
        update_curricula: bool = True,
    ) -> None:
        self.generate = generate
        self.formatter: Formatter = formatter if formatter is not None else HistoryFormatter()
        self.controller = controller
        self.horizon = horizon
        self.gamma = float(gamma)
        self.update_curricula = update_curricula
        self.last_level_changes: list[LevelChange] = []

    async def _start(self, session: EnvSessionLike, seed: int | None) -> _Episode:
        want = None
        if self.controller is not None:
            want = self.controller.level(session.env_id)
            session.set_complexity(want)
        try:
            obs, info = await session.reset(seed=seed)
        except Exception as err:  # a reset failure ends only this slot's episode, like a step failure
            traj = Trajectory(env_id=session.env_id, seed=seed, complexity=want or 0, truncated=True)
            traj.error = f"reset failed: {type(err).__name__}: {err}"
            return _Episode(session, traj, History(session.env_id, [""]), done=True)
        got = int(info.get("complexity", want if want is not None else 1))
        if want is not None and got != want:
            raise RuntimeError(
                f"{session.env_id}: controller level is {want} but the env reset at complexity {got}; "
                "the session does not forward set_complexity to its base env"
            )
        traj = Trajectory(env_id=session.env_id, seed=seed, complexity=got, final_observation=obs)
        return _Episode(session, traj, History(session.env_id, [obs]), last_info=dict(info))

    async def _step(self, ep: _Episode, action: str, cap: int | None) -> None:
        obs_before = ep.history.observations[-1]
        try:
            obs, reward, terminated, truncated, info = await ep.session.step(action)
        except Exception as err:  # an env failure ends its own episode, never the batch
            ep.traj.error = f"{type(err).__name__}: {err}"
            ep.traj.truncated = True
            ep.done = True
            return
        ep.traj.turns.append(Turn(obs_before, action, float(reward), dict(info)))
        ep.history.actions.append(action)
        ep.history.observations.append(obs)
        ep.traj.final_observation = obs
        if terminated or truncated:
            ep.done = True
            if info.get("error"):  # vector backends report a crashed/hung env this way instead of raising
                ep.traj.error = str(info["error"])
            ep.traj.truncated = bool(truncated) and not terminated
            ep.traj.success = info.get("success") is True
        elif cap is not None and len(ep.traj.turns) >= cap:
            ep.done = True
            ep.traj.truncated = True
            ep.traj.metrics["horizon_truncated"] = True

    async def collect(
        self, sessions: Sequence[EnvSessionLike], seeds: Sequence[int | None] | None = None
    ) -> list[Trajectory]:
        """Run one episode per session (with its seed) and return the trajectories in session order."""
        if seeds is None:
            seeds = [None] * len(sessions)
        if len(seeds) != len(sessions):
            raise ValueError(f"got {len(seeds)} seeds for {len(sessions)} sessions")
        episodes = list(await asyncio.gather(*(self._start(s, sd) for s, sd in zip(sessions, seeds))))
        cap = self.horizon.horizon() if self.horizon is not None else None
        while True:
            active = [ep for ep in episodes if not ep.done]
            if not active:
                break
            prompts = [self.formatter.format(ep.history) for ep in active]
            texts = await self.generate(prompts)
            if not isinstance(texts, list | tuple) or len(texts) != len(prompts):
                got = len(texts) if isinstance(texts, list | tuple) else type(texts).__name__
                raise ValueError(f"generate() must return one text per prompt: {len(prompts)} prompts, got {got}")
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("generate() must return a list of str")
            await asyncio.gather(*(self._step(ep, t, cap) for ep, t in zip(active, texts)))
        trajs = [ep.traj for ep in episodes]
        for t in trajs:
            t.metrics["turns"] = len(t.turns)
            if cap is not None:
                t.metrics["horizon"] = cap
        fill_returns(trajs, self.gamma)
        if self.update_curricula:
            self.update(trajs)
        return trajs

    def update(self, trajectories: Sequence[Trajectory]) -> list[LevelChange]:
        """Feed a batch's success to the controller and advance the horizon schedule by one step."""
        valid = [t for t in trajectories if t.error is None]
        self.last_level_changes = []
        if self.controller is not None and valid:
            self.last_level_changes = self.controller.update_from_trajectories(valid)
        if self.horizon is not None and valid:
            self.horizon.update(sum(t.success for t in valid) / len(valid))
        return self.last_level_changes

    def collect_sync(
        self, sessions: Sequence[EnvSessionLike], seeds: Sequence[int | None] | None = None
    ) -> list[Trajectory]:
        """`collect` for callers without an event loop."""
        return asyncio.run(self.collect(sessions, seeds))
