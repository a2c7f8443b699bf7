"""Process state of the rank-0 process, where RL2 runs its env module, rollout and advantages.

RL2 executes the env file with ``importlib`` as a fresh module, so nothing lives in the env file itself: it reads
the settings, the curriculum service, the renderer and the train/validation flag from here.
"""

from __future__ import annotations

import contextvars
import itertools
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum import CurriculumState
from gymverse.curriculum.service import CurriculumService, LocalCurriculum
from gymverse.rollout import EpisodeRecord, Renderer, renderer_for
from gymverse.vector.pool import configure_shared_pool, shared_pool

from gymverse_rl2.settings import Settings


@dataclass
class Runtime:
    """Settings plus what a run accumulates in the rank-0 process."""

    settings: Settings
    curriculum: CurriculumService
    #: Episode records of the current rollout, by the number each sequence carries in `RECORD_TAG`.
    records: dict[int, EpisodeRecord] = field(default_factory=dict)
    pending: list[EpisodeRecord] | None = None  # one record per trajectory of the batch awaiting advantages
    renderers: dict[int, Renderer] = field(default_factory=dict)
    _ids: Any = field(default_factory=itertools.count)

    def add(self, record: EpisodeRecord) -> int:
        """Keep `record` for the advantage hook; returns the number its sequences carry."""
        key = next(self._ids)
        self.records[key] = record
        return key

    def renderer(self, tokenizer: Any) -> Renderer:
        """The core renderer for RL2's tokenizer (one per tokenizer)."""
        key = id(tokenizer)
        if key not in self.renderers:
            self.renderers[key] = renderer_for(tokenizer, system_prompt=self.settings.system_prompt)
        return self.renderers[key]


#: Tensor key carrying each sequence's record number from the rollout to the advantage hook (PERPO only); the
#: hook on ``Rollout.__call__`` removes it before RL2's workers see the batch.
RECORD_TAG = "gymverse_record"

_current: Runtime | None = None
#: False while RL2 runs validation rollouts (set around `Rollout.__call__` by the installed hooks).
training: contextvars.ContextVar[bool] = contextvars.ContextVar("gymverse_rl2_training", default=True)


def configure(settings: Settings) -> Runtime:
    """Start this process's runtime: the curriculum and the shared env pool (sized, default timeouts)."""
    global _current
    try:
        configure_shared_pool(settings.pool_size)
    except RuntimeError:  # a re-install with other batch settings (tests); a run configures once
        shared_pool().close()
        configure_shared_pool(settings.pool_size)
    state = CurriculumState.from_config(settings.curriculum.to_config())
    _current = Runtime(settings, LocalCurriculum(state))
    return _current


def current() -> Runtime:
    """This process's runtime (from `GYMVERSE_RL2`, or defaults, when no launcher configured it)."""
    global _current
    if _current is None:
        _current = configure(Settings.from_env())
    return _current


def reset() -> None:
    """Forget the runtime (tests)."""
    global _current
    _current = None
