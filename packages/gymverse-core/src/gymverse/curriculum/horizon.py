"""Horizon schedules (ScalingInter-RL): the turn cap per episode as training proceeds.

``step`` counts completed training steps (the global step; 0 before the first update). Every schedule exposes
``horizon()`` (the cap for the next rollout), ``update(success_rate=None)`` (call once per training step, after
it) and JSON-able ``state_dict()/load_state_dict()``.

* `FixedHorizon(h)`: always ``h``.
* `StepwiseHorizon(rounds=[10, 20, 30], interval=K)`: ``horizon_at(step) = rounds[min(step // K, len - 1)]``, a
  pure function of the global step, so resuming at any step (a multiple of ``K`` included) lands in the same
  stage as an uninterrupted run; AgentGym-RL advances its stage counter on resume and so skips a stage there.
* `AdaptiveHorizon(initial, maximum, increment, threshold, patience)`: when the success rate measured at the
  current cap is ``>= threshold`` for ``patience`` consecutive updates, the cap grows by ``increment`` (up to
  ``maximum``) and the streak restarts; any update below the threshold resets the streak.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class HorizonSchedule(ABC):
    """Base class: a turn cap that may change with the global step or with measured success."""

    kind: ClassVar[str]

    def __init__(self, step: int = 0) -> None:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        self.step = int(step)

    @abstractmethod
    def horizon(self) -> int:
        """Turn cap for the next rollout."""

    def update(self, success_rate: float | None = None) -> int:
        """Record one finished training step (and its success rate); returns the next cap."""
        self.step += 1
        return self.horizon()

    def cap(self, env_max_turns: int) -> int:
        """The effective turn limit for an env whose own budget is `env_max_turns`."""
        return min(self.horizon(), int(env_max_turns))

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-able)."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: kind, config and the global step (plus subclass fields)."""
        return {"kind": self.kind, "config": self.config(), "step": self.step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output."""
        if state.get("kind") != self.kind:
            raise ValueError(f"state is for a {state.get('kind')!r} schedule, not {self.kind!r}")
        self.__init__(**state["config"])  # type: ignore[misc]  # reset config, then the counters
        self.step = int(state["step"])


class FixedHorizon(HorizonSchedule):
    """A constant turn cap."""

    kind = "fixed"

    def __init__(self, max_turns: int, step: int = 0) -> None:
        super().__init__(step)
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = int(max_turns)

    def horizon(self) -> int:
        """The fixed cap."""
        return self.max_turns

    def config(self) -> dict[str, Any]:
        """Constructor arguments."""
        return {"max_turns": self.max_turns}


class StepwiseHorizon(HorizonSchedule):
    """``rounds[min(step // interval, len(rounds) - 1)]``: a pure function of the global step."""

    kind = "stepwise"

    def __init__(self, rounds: Sequence[int] = (10, 20, 30), interval: int = 100, step: int = 0) -> None:
        super().__init__(step)
        if not rounds or any(int(r) < 1 for r in rounds):
            raise ValueError(f"rounds must be a non-empty list of positive turn caps, got {list(rounds)}")
        if interval < 1:
            raise ValueError(f"interval must be >= 1, got {interval}")
        self.rounds = [int(r) for r in rounds]
        self.interval = int(interval)

    def stage_at(self, step: int) -> int:
        """Stage index at global `step`."""
        return min(step // self.interval, len(self.rounds) - 1)

    def horizon_at(self, step: int) -> int:
        """Turn cap at global `step`."""
        return self.rounds[self.stage_at(step)]

    def horizon(self) -> int:
        """Turn cap at the current step."""
        return self.horizon_at(self.step)

    def config(self) -> dict[str, Any]:
        """Constructor arguments."""
        return {"rounds": list(self.rounds), "interval": self.interval}


class AdaptiveHorizon(HorizonSchedule):
    """Grow the cap by `increment` once success at the current cap stays ``>= threshold`` for `patience` steps."""

    kind = "adaptive"

    def __init__(
        self,
        initial: int = 5,
        maximum: int = 30,
        increment: int = 5,
        threshold: float = 0.6,
        patience: int = 1,
        step: int = 0,
    ) -> None:
        super().__init__(step)
        if not 1 <= initial <= maximum:
            raise ValueError(f"need 1 <= initial <= maximum, got {initial}, {maximum}")
        if increment < 1 or patience < 1:
            raise ValueError("increment and patience must be >= 1")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.initial, self.maximum, self.increment = int(initial), int(maximum), int(increment)
        self.threshold, self.patience = float(threshold), int(patience)
        self.current = self.initial
        self.streak = 0

    def horizon(self) -> int:
        """The current cap."""
        return self.current

    def update(self, success_rate: float | None = None) -> int:
        """Record a step's success rate at the current cap; returns the (possibly extended) cap."""
        if success_rate is None or not 0.0 <= float(success_rate) <= 1.0:
            raise ValueError(f"AdaptiveHorizon.update needs a success rate in [0, 1], got {success_rate!r}")
        self.step += 1
        if float(success_rate) >= self.threshold:
            self.streak += 1
            if self.streak >= self.patience:
                self.current = min(self.maximum, self.current + self.increment)
                self.streak = 0
        else:
            self.streak = 0
        return self.current

    def config(self) -> dict[str, Any]:
        """Constructor arguments."""
        return {
            "initial": self.initial,
            "maximum": self.maximum,
            "increment": self.increment,
            "threshold": self.threshold,
            "patience": self.patience,
        }

    def state_dict(self) -> dict[str, Any]:
        """Base state plus the current cap and streak."""
        return {**super().state_dict(), "current": self.current, "streak": self.streak}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output."""
        super().load_state_dict(state)
        self.current, self.streak = int(state["current"]), int(state["streak"])


_KINDS: dict[str, type[HorizonSchedule]] = {c.kind: c for c in (FixedHorizon, StepwiseHorizon, AdaptiveHorizon)}


def horizon_from_state(state: Mapping[str, Any]) -> HorizonSchedule:
    """Rebuild any schedule from its `state_dict`."""
    kind = state.get("kind")
    if kind not in _KINDS:
        raise ValueError(f"unknown horizon schedule kind {kind!r}; known: {sorted(_KINDS)}")
    sched = _KINDS[kind](**state["config"])
    sched.load_state_dict(state)
    return sched
