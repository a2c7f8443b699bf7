"""Building blocks of GymVerse's command-line tools: argparse types, one-line usage errors.

The `gymverse` command (package `gymverse`) and the commands other packages add to it (``evaluate``, ``synth``,
``train``, the adapters' ``make-dataset``) share them, so every tool rejects a bad level or seed the same way.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from gymverse.complexity import MAX_LEVEL, MIN_LEVEL, check_level


class UsageError(Exception):
    """A user mistake reported as one line and exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) so mistakes are easy to spot in logs."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def complexity_arg(text: str) -> int:
    """argparse type: a complexity level in 1..10."""
    try:
        return check_level(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"complexity must be an integer in {MIN_LEVEL}..{MAX_LEVEL}, got {text!r}"
        ) from None


def seed_arg(text: str) -> int:
    """argparse type: a non-negative integer seed."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be a non-negative integer, got {text!r}")
    return value


def seconds_arg(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def levels_arg(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated complexity levels such as ``1,5,10``."""
    return tuple(complexity_arg(part.strip()) for part in text.split(",") if part.strip()) or _empty("levels")


def seeds_arg(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated seeds such as ``0,1,2``."""
    return tuple(seed_arg(part.strip()) for part in text.split(",") if part.strip()) or _empty("seeds")


def _empty(what: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{what} must list at least one integer")


def positive_int_arg(text: str) -> int:
    """argparse type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


__all__ = [
    "Parser",
    "UsageError",
    "complexity_arg",
    "levels_arg",
    "positive_int_arg",
    "seconds_arg",
    "seed_arg",
    "seeds_arg",
]
