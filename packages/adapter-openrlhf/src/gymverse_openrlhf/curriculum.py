"""The run's curriculum: core's `CurriculumState` in a detached Ray actor named per run (`run_scoped_name`: the
launcher and the actors OpenRLHF's driver creates, `RolloutRayActor` and `PPOTrainer`, share one Ray job id)."""

from __future__ import annotations

import os
from pathlib import Path

from gymverse.curriculum import RayCurriculum, connect_ray_curriculum, start_ray_curriculum
from gymverse.curriculum.service import load_checkpoint, run_scoped_name

from gymverse_openrlhf.config import GymVerseConfig

BASE_NAME = "gymverse_openrlhf_curriculum"
_service: list[RayCurriculum] = []


def actor_name() -> str:
    return run_scoped_name(BASE_NAME)


def resumed_folder(ckpt_path: str) -> str | None:
    """The checkpoint tag folder ``--ckpt.load_enable`` resumes (DeepSpeed's ``_actor/latest``), if any."""
    latest = Path(ckpt_path, "_actor", "latest")
    return os.path.join(ckpt_path, "_actor", latest.read_text().strip()) if latest.exists() else None


def create_actor(cfg: GymVerseConfig, resume: str | None = None) -> RayCurriculum:
    """Start the run's actor fresh, or from checkpoint folder `resume` (strict: a folder without the file fails)."""
    service = start_ray_curriculum(cfg.curriculum.to_config(), name=actor_name())
    if resume is not None:
        load_checkpoint(service, resume)
    return service


def get_service() -> RayCurriculum:
    """The run's actor (looked up once per process; ``_service.clear()`` forgets it)."""
    if not _service:
        try:
            _service.append(connect_ray_curriculum(actor_name()))
        except RuntimeError as err:
            raise RuntimeError(f"{err}; launch training with `python -m gymverse_openrlhf.train ...`") from None
    return _service[0]
