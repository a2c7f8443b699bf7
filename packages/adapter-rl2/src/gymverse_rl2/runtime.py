"""Process state of RL2's rank-0 process, where the env file (a fresh module each time RL2 loads it), rollout and
advantages run: settings, curriculum, the rollout's episode records and the train/validation flag."""

from __future__ import annotations

import contextvars
import itertools
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum import CurriculumState
from gymverse.curriculum.service import CurriculumService, LocalCurriculum
from gymverse.rollout import EpisodeRecord
from gymverse.vector.pool import configure_shared_pool, shared_pool

from gymverse_rl2.settings import Settings

#: Tensor key carrying each sequence's record number from the rollout to `Rollout.__call__`'s hook (removed there).
RECORD_TAG = "gymverse_record"
#: False while RL2 runs validation rollouts (set around `Rollout.__call__` by the installed hooks).
training: contextvars.ContextVar[bool] = contextvars.ContextVar("gymverse_rl2_training", default=True)


@dataclass
class Runtime:
    """Settings plus what a run accumulates in the rank-0 process."""

    settings: Settings
    curriculum: CurriculumService
    records: dict[int, EpisodeRecord] = field(default_factory=dict)  # this rollout's, by their `RECORD_TAG`
    pending: list[EpisodeRecord] | None = None  # one per trajectory of the batch awaiting advantages
    _ids: Any = field(default_factory=itertools.count)

    def add(self, record: EpisodeRecord) -> int:
        """Keep `record` for the advantage hook; returns the number its sequences carry."""
        key = next(self._ids)
        self.records[key] = record
        return key


_current: Runtime | None = None


def configure(settings: Settings) -> Runtime:
    """Start this process's runtime: the curriculum and the shared env pool (sized, default timeouts)."""
    global _current
    try:
        configure_shared_pool(settings.pool_size)
    except RuntimeError:  # a re-install with other batch settings (tests); a run configures once
        shared_pool().close()
        configure_shared_pool(settings.pool_size)
    _current = Runtime(settings, LocalCurriculum(CurriculumState.from_config(settings.curriculum.to_config())))
    return _current


def current() -> Runtime:
    """This process's runtime (from `GYMVERSE_RL2`, or defaults, when no launcher configured it)."""
    global _current
    if _current is None:
        _current = configure(Settings.from_env())
    return _current
