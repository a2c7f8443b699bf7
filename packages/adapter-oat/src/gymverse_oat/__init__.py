"""GymVerse on oat: `GymVerseActor` (episodes), `GymVerseLearner` (PERPO, curriculum), `GymVerseArgs` (flags),
``gymverse-oat`` (`gymverse_oat.cli`). oat is imported only when these are used."""

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
