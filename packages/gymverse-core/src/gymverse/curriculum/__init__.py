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

__all__ = [
    "AdaptiveHorizon",
    "BoundarySelector",
    "ComplexityController",
    "EnvMixer",
    "FixedHorizon",
    "HorizonSchedule",
    "LevelChange",
    "StepwiseHorizon",
    "horizon_from_state",
    "rank_trim_indices",
    "success_by_env",
    "trim_count",
]
