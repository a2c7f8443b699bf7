"""The ``gymverse.*`` options of an RL2 run, written like RL2's own Hydra overrides (``gymverse.perpo=true``).

The launcher (`gymverse_rl2.train`) removes them from the command line before RL2's Hydra sees them, so RL2's
config and its checks stay exactly RL2's. Curriculum knobs are the core's `CurriculumOptions`, one name each
(``gymverse.evolve``, ``gymverse.patience``, ``gymverse.max_turns``, ``gymverse.horizon`` ...); the adapter's own
are ``perpo``, ``max_response_tokens`` and ``system_prompt``. ``max_sequence_tokens`` and ``pool_size`` are not
options: the launcher derives them from RL2's config (`gymverse_rl2.train.launch_settings`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gymverse.curriculum.options import KNOBS, CurriculumOptions, parse_value

#: Environment variable carrying the JSON settings (set by the launcher, read by the env file's process).
ENV_VAR = "GYMVERSE_RL2"
PREFIX = "gymverse."
OWN = ("perpo", "max_response_tokens", "system_prompt")


@dataclass(frozen=True)
class Settings:
    """GymVerse options of one RL2 run (defaults change nothing in RL2)."""

    perpo: bool = False  # env-level PERPO advantages instead of RL2's per-prompt grouping
    max_response_tokens: int | None = None  # token budget of a whole episode's response (model + env turns)
    system_prompt: str = ""
    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    max_sequence_tokens: int | None = None  # prompt + response cap, from RL2's max_length_per_device (launcher)
    pool_size: int = 256  # env sessions at once, from RL2's batch settings (launcher)

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
        text = os.environ.get(ENV_VAR)
        return cls.from_json(text) if text else cls()


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
