"""argparse types shared by every GymVerse command line: complexity levels, seeds, positive counts and seconds."""

from __future__ import annotations

import argparse
from typing import NoReturn

from gymverse.complexity import MAX_LEVEL, MIN_LEVEL, check_level


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
