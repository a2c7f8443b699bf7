"""Curriculum state shared by every agent-loop worker: complexity levels and the horizon, in one named Ray actor.

`CurriculumState` is plain Python (unit-testable without Ray). Agent loops ask it for the level and turn cap at
each reset; the trainer feeds it each training step's per-env success once (`end_step`) and saves/loads it with
verl checkpoints. `curriculum_actor` returns the named actor, creating it on first use (``get_if_exists``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from gymverse.curriculum import ComplexityController, HorizonSchedule, horizon_from_state

from gymverse_verl.settings import GymVerseSettings

STATE_VERSION = 1


class CurriculumState:
    """Per-env complexity controller plus an optional horizon schedule."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self.settings = GymVerseSettings.from_dict(settings or {})
        self.controller = ComplexityController(**self.settings.curriculum)
        self.horizon: HorizonSchedule | None = self.settings.build_horizon()
        self.history: list[dict[str, Any]] = []

    def episode_config(self, env_id: str) -> dict[str, int | None]:
        """Level and turn cap for the next reset of `env_id` (level None when evolution is off)."""
        level = self.controller.level(env_id) if self.settings.evolution else None
        cap = self.horizon.horizon() if self.horizon is not None else self.settings.max_turns
        return {"complexity": level, "max_turns": cap}

    def levels(self) -> dict[str, int]:
        """Current level of every env seen so far."""
        return self.controller.levels()

    def end_step(self, per_env_success: Mapping[str, Sequence[bool]]) -> list[dict[str, Any]]:
        """Apply one training step's results (once per step); returns the level changes as dicts."""
        flags = {k: [bool(x) for x in v] for k, v in per_env_success.items() if len(v)}
        events = self.controller.update(flags) if self.settings.evolution else []
        if self.horizon is not None:
            total = sum(len(v) for v in flags.values())
            rate = sum(sum(v) for v in flags.values()) / total if total else None
            if self.horizon.kind == "adaptive" and rate is None:
                self.horizon.step += 1  # a step without GymVerse episodes still counts as a step
            else:
                self.horizon.update(rate)
        out = [asdict(e) for e in events]
        self.history.extend(out)
        return out

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state (settings, controller, horizon, level-change history)."""
        return {
            "version": STATE_VERSION,
            "settings": self.settings.to_dict(),
            "controller": self.controller.state_dict(),
            "horizon": self.horizon.state_dict() if self.horizon is not None else None,
            "history": list(self.history),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output; the running settings are kept, the counters and levels are restored."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported gymverse curriculum state version {state.get('version')!r}")
        self.controller.load_state_dict(state["controller"])
        if state.get("horizon") is not None:
            self.horizon = horizon_from_state(state["horizon"])
        self.history = list(state.get("history", []))


def curriculum_actor(settings: GymVerseSettings) -> Any:
    """The named curriculum actor (created with these settings if it does not exist yet)."""
    import ray

    options: dict[str, Any] = {"name": settings.actor_name, "get_if_exists": True, "num_cpus": 0}
    if settings.actor_namespace is not None:
        options["namespace"] = settings.actor_namespace
    return ray.remote(CurriculumState).options(**options).remote(settings.to_dict())
