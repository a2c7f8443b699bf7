"""``gymverse.<name>=<value>`` options (taken out before RL2's Hydra sees them: `OWN` plus the core's
`CurriculumOptions` knobs, one name each) and the rank-0 process state (`current`: RL2 loads the env file as a
fresh module, so settings, curriculum and episode records live here)."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum import CurriculumState
from gymverse.curriculum.options import KNOBS, CurriculumOptions, parse_value
from gymverse.curriculum.service import CurriculumService, LocalCurriculum
from gymverse.pool import configure_shared_pool
from gymverse.rollout import EpisodeRecord

PREFIX = "gymverse."
OWN = ("perpo", "max_response_tokens", "system_prompt")
#: Tensor key carrying each sequence's record number from the rollout to `Rollout.__call__`'s hook (removed there).
RECORD_TAG = "gymverse_record"
#: False while RL2 runs validation rollouts (set around `Rollout.__call__` by the installed hooks).
training: contextvars.ContextVar[bool] = contextvars.ContextVar("gymverse_rl2_training", default=True)


@dataclass(frozen=True)
class Settings:
    """GymVerse options of one RL2 run (defaults change nothing in RL2)."""

    perpo: bool = False  # env-level PERPO advantages instead of RL2's per-prompt grouping
    max_response_tokens: int | None = None  # token budget of a whole episode's response (model + env turns)
    system_prompt: str = ""
    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    max_sequence_tokens: int | None = None  # prompt + response cap, from RL2's max_length_per_device
    pool_size: int = 256  # env sessions open at once, from RL2's batch settings


def split_argv(argv: Sequence[str]) -> tuple[Settings, list[str]]:
    """Split a command line into GymVerse settings and the untouched RL2 overrides."""
    own: dict[str, Any] = {}
    knobs: dict[str, str] = {}
    rest: list[str] = []
    for arg in argv:
        if not arg.lstrip("+").startswith(PREFIX):
            rest.append(arg)
            continue
        key, sep, raw = arg.lstrip("+")[len(PREFIX) :].partition("=")
        if not sep:
            raise ValueError(f"{arg!r}: write GymVerse options as gymverse.<name>=<value>")
        if key not in OWN and key not in KNOBS:
            raise ValueError(f"unknown GymVerse option gymverse.{key}; known: {[*OWN, *KNOBS]}")
        if key in OWN:
            own[key] = parse_value(Settings, key, raw, prefix=PREFIX)
        else:
            knobs[key] = raw
    if (own.get("max_response_tokens") or 1) < 1:
        raise ValueError(f"gymverse.max_response_tokens must be >= 1, got {own['max_response_tokens']}")
    return Settings(**own, curriculum=CurriculumOptions.parse(knobs, prefix=PREFIX)), rest


@dataclass
class Runtime:
    """Settings plus what a run accumulates in the rank-0 process."""

    settings: Settings
    curriculum: CurriculumService
    records: list[EpisodeRecord] = field(default_factory=list)  # this rollout's, by their `RECORD_TAG` number
    pending: list[EpisodeRecord] | None = None  # one per trajectory of the batch awaiting advantages

    def add(self, record: EpisodeRecord) -> int:
        """Keep `record` for the advantage hook; returns the number its sequences carry."""
        self.records.append(record)
        return len(self.records) - 1


_current: Runtime | None = None


def configure(settings: Settings) -> Runtime:
    """Start this process's runtime: the curriculum and the shared env pool (sized, default timeouts)."""
    global _current
    configure_shared_pool(settings.pool_size, replace=True)  # a re-install with other batch settings (tests)
    _current = Runtime(settings, LocalCurriculum(CurriculumState.from_config(settings.curriculum.to_config())))
    return _current


def current() -> Runtime:
    """This process's runtime (RL2 is Ray-less: the launcher configured it in this very process; else defaults)."""
    global _current
    if _current is None:
        _current = configure(Settings())
    return _current
