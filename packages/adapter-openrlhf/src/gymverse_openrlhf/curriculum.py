"""The run's curriculum: GymVerse's one `CurriculumState` in a detached Ray actor named per run.

The name is `gymverse.curriculum.run_scoped_name` of `BASE_NAME`: the launcher (OpenRLHF's driver) and every actor
it creates (`RolloutRayActor`, where the agents run, and the `PPOTrainer` actor) share its Ray job id, so they all
find the same actor while a second run on the cluster gets its own. Agents read each episode's level there and
record every finished episode once (before OpenRLHF's dynamic filtering); the trainer closes one step per rollout
batch and saves the state into each checkpoint tag's folder (``<ckpt.path>/_actor/<tag>``), before DeepSpeed
writes its ``latest`` marker; ``--ckpt.load_enable`` restores the tag OpenRLHF resumes (strict: no file, no run).
"""

from __future__ import annotations

import os

from gymverse.curriculum import RayCurriculum, connect_ray_curriculum, start_ray_curriculum
from gymverse.curriculum.service import load_checkpoint, run_scoped_name

from gymverse_openrlhf.config import GymVerseConfig

BASE_NAME = "gymverse_openrlhf_curriculum"


def actor_name() -> str:
    """This run's curriculum actor name (Ray must be initialized)."""
    return run_scoped_name(BASE_NAME)


def tag_folder(ckpt_path: str, tag: str) -> str:
    """The folder OpenRLHF's policy actor saves checkpoint `tag` into (the curriculum file goes there too)."""
    return os.path.join(ckpt_path, "_actor", tag)


def resumed_folder(ckpt_path: str) -> str | None:
    """The checkpoint folder OpenRLHF resumes with ``--ckpt.load_enable`` (DeepSpeed's ``latest``), if any."""
    latest = os.path.join(ckpt_path, "_actor", "latest")
    if not os.path.exists(latest):
        return None
    with open(latest) as fh:
        return tag_folder(ckpt_path, fh.read().strip())


def create_actor(cfg: GymVerseConfig, resume: str | None = None) -> RayCurriculum:
    """Start the run's curriculum actor fresh, or from checkpoint folder `resume`."""
    service = start_ray_curriculum(cfg.curriculum.to_config(), name=actor_name())
    if resume is not None:
        load_checkpoint(service, resume)
    return service


_service: RayCurriculum | None = None


def get_service() -> RayCurriculum:
    """The run's curriculum actor (looked up once per process); a clear error if it was never started."""
    global _service
    if _service is None:
        try:
            _service = connect_ray_curriculum(actor_name())
        except RuntimeError as err:
            raise RuntimeError(f"{err}; launch training with `python -m gymverse_openrlhf.train ...`") from None
    return _service


def reset_handle() -> None:
    """Forget the cached handle (after the actor was restarted, or between tests)."""
    global _service
    _service = None
