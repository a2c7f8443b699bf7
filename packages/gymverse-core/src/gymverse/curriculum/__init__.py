"""Curricula: complexity evolution, horizon schedules, capability-boundary selection and env mixing.

Each object is small and round-trips through JSON-able ``state_dict()`` / ``load_state_dict()``.
"""

from gymverse.curriculum.boundary import BoundarySelector, rank_trim_indices, trim_count
from gymverse.curriculum.complexity import ComplexityController, LevelChange, success_by_env
from gymverse.curriculum.horizon import (
    AdaptiveHorizon,
    FixedHorizon,
    HorizonSchedule,
    StepwiseHorizon,
    horizon_from_state,
)
from gymverse.curriculum.mixer import EnvMixer
from gymverse.curriculum.options import CurriculumOptions
from gymverse.curriculum.service import (
    CHECKPOINT_FILE,
    CurriculumService,
    LocalCurriculum,
    RayCurriculum,
    connect_ray_curriculum,
    load_checkpoint,
    run_scoped_name,
    save_checkpoint,
    start_ray_curriculum,
)
from gymverse.curriculum.state import CurriculumState, EpisodeConfig, EpisodeOutcome, StepReport

__all__ = [
    "CHECKPOINT_FILE",
    "AdaptiveHorizon",
    "BoundarySelector",
    "ComplexityController",
    "CurriculumOptions",
    "CurriculumService",
    "CurriculumState",
    "EnvMixer",
    "EpisodeConfig",
    "EpisodeOutcome",
    "FixedHorizon",
    "HorizonSchedule",
    "LevelChange",
    "LocalCurriculum",
    "RayCurriculum",
    "StepReport",
    "StepwiseHorizon",
    "connect_ray_curriculum",
    "horizon_from_state",
    "load_checkpoint",
    "rank_trim_indices",
    "run_scoped_name",
    "save_checkpoint",
    "start_ray_curriculum",
    "success_by_env",
    "trim_count",
]
