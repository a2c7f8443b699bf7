"""The ``gymverse.*`` options of an RL2 run, written like RL2's Hydra overrides (``gymverse.perpo=true``) and taken
out by the launcher before RL2's Hydra sees them. Curriculum knobs are the core's `CurriculumOptions`, one name
each (``gymverse.evolve``, ``gymverse.patience``, ``gymverse.max_turns``, ``gymverse.horizon`` ...); the adapter's
own are `OWN`. ``max_sequence_tokens`` and ``pool_size`` come from RL2's config (`train.launch_settings`)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum.options import KNOBS, CurriculumOptions, parse_value

ENV_VAR = "GYMVERSE_RL2"  # the JSON settings, set by the launcher for every process of the run
PREFIX = "gymverse."
OWN = ("perpo", "max_response_tokens", "system_prompt")


@dataclass(frozen=True)
class Settings:
    """GymVerse options of one RL2 run (defaults change nothing in RL2)."""

    perpo: bool = False  # env-level PERPO advantages instead of RL2's per-prompt grouping
    max_response_tokens: int | None = None  # token budget of a whole episode's response (model + env turns)
    system_prompt: str = ""
    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    max_sequence_tokens: int | None = None  # prompt + response cap, from RL2's max_length_per_device
    pool_size: int = 256  # env sessions open at once, from RL2's batch settings

    def __post_init__(self) -> None:
        if self.max_response_tokens is not None and self.max_response_tokens < 1:
            raise ValueError(f"gymverse.max_response_tokens must be >= 1, got {self.max_response_tokens}")

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes`."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        """JSON form (the value of `ENV_VAR`)."""
        return json.dumps({**dataclasses.asdict(self), "curriculum": self.curriculum.to_dict()}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        """Inverse of `to_json`."""
        data = json.loads(text)
        return cls(**{**data, "curriculum": CurriculumOptions.from_dict(data.get("curriculum", {}))})

    @classmethod
    def from_env(cls) -> Settings:
        """The settings of this process (defaults when `ENV_VAR` is unset)."""
        return cls.from_json(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR) else cls()


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
    return Settings(**own, curriculum=CurriculumOptions.parse(knobs, prefix=PREFIX)), rest
