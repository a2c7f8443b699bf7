"""Complexity evolution shared by every OpenRLHF process: a named Ray actor around `ComplexityController`.

Agent instances run inside vLLM rollout actors and the advantage computation inside the trainer actor, so the
levels live in one named actor: agents read ``level(env_id)`` at reset, the trainer reports each batch's
success per env through ``update``. The state is a JSON file next to OpenRLHF's checkpoints.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from gymverse.curriculum import ComplexityController

from gymverse_openrlhf.config import CURRICULUM_ACTOR, STATE_FILE, GymVerseConfig


class CurriculumState:
    """The actor's body (plain Python, so it is testable without Ray)."""

    def __init__(self, cfg: GymVerseConfig) -> None:
        self.controller = ComplexityController(
            initial_level=cfg.initial_level,
            promote_at=cfg.promote_at,
            demote_at=cfg.demote_at,
            promote_patience=cfg.patience,
            demote_patience=cfg.patience,
        )

    def level(self, env_id: str) -> int:
        """Level to reset `env_id` at."""
        return self.controller.level(env_id)

    def levels(self) -> dict[str, int]:
        """Levels of every env seen so far."""
        return self.controller.levels()

    def update(self, per_env_success: Mapping[str, Sequence[bool]]) -> list[dict[str, Any]]:
        """One batch's success flags per env; returns the level changes as dicts."""
        return [asdict(c) for c in self.controller.update(per_env_success)]

    def state_dict(self) -> dict[str, Any]:
        """The controller's JSON state."""
        return self.controller.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output."""
        self.controller.load_state_dict(state)


def state_path(ckpt_path: str) -> str:
    """Where the curriculum state lives for an OpenRLHF ``--ckpt.path``."""
    return os.path.join(ckpt_path, STATE_FILE)


def save_state(state: Mapping[str, Any], ckpt_path: str, global_step: int) -> str:
    """Write the state (with the step it belongs to) atomically next to the checkpoints; returns the path."""
    os.makedirs(ckpt_path, exist_ok=True)
    path = state_path(ckpt_path)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump({"global_step": global_step, "controller": dict(state)}, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def load_state(ckpt_path: str) -> dict[str, Any] | None:
    """The saved controller state, or None if there is none."""
    path = state_path(ckpt_path)
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        data = json.load(fh)
    if "controller" not in data:
        raise ValueError(f"{path} is not a GymVerse curriculum state file (no 'controller' key)")
    return dict(data["controller"])


def create_actor(cfg: GymVerseConfig) -> Any:
    """Start the named curriculum actor (restoring saved state when OpenRLHF resumes); returns its handle."""
    import ray

    actor: Any = ray.remote(num_cpus=0)(CurriculumState).options(name=CURRICULUM_ACTOR).remote(cfg)
    if cfg.load and cfg.ckpt_path:
        state = load_state(cfg.ckpt_path)
        if state is not None:
            ray.get(actor.load_state_dict.remote(state))
    return actor


_handle: Any = None


def get_actor() -> Any:
    """Handle of the named curriculum actor (cached per process); a clear error if it was never started."""
    global _handle
    if _handle is None:
        import ray

        try:
            _handle = ray.get_actor(CURRICULUM_ACTOR)
        except ValueError:
            raise RuntimeError(
                f"--gymverse.evolve is on but the Ray actor {CURRICULUM_ACTOR!r} does not exist: launch training "
                "with `python -m gymverse_openrlhf.train ...`, which starts it"
            ) from None
    return _handle


def reset_handle() -> None:
    """Forget the cached handle (after the actor was restarted, or between tests)."""
    global _handle
    _handle = None
