"""GymVerse on oat: PERPO (per-env return normalization) and environment evolution in oat's multi-turn PPO.

`GymVerseActor` plays GymVerse envs through the core episode pipeline, `GymVerseLearner` turns every turn into a
transition with a PERPO advantage and runs the curriculum, `GymVerseArgs` carries the reference recipe's flags and
``gymverse-oat`` (`gymverse_oat.cli`) launches oat's program. oat is imported only when these are used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "GymVerseActor": "gymverse_oat.actor",
    "GymVerseArgs": "gymverse_oat.args",
    "GymVerseLearner": "gymverse_oat.learner",
    "GymVerseTransition": "gymverse_oat.episodes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gymverse_oat' has no attribute {name!r}")
