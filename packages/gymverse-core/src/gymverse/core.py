"""The environment contract: `Env`, `Wrapper`, `StepResult`, `EnvMetadata`.

An `Env` is a text environment for an LLM agent. Subclasses implement three hooks:

* ``_reset(self) -> tuple[str, dict]``: build a fresh instance from ``self.params`` (already resolved for the
  current complexity level) using only ``self.rng``; return the first observation and info.
* ``_step(self, action: str) -> StepResult``: apply one (raw text) action. Parse it with :mod:`gymverse.actions`;
  raising :class:`gymverse.actions.ActionFormatError` is the documented way to report a malformed action: the base
  class turns it into a format-error observation with ``format_penalty`` and never lets it escape.
* ``solve(self) -> str``: the oracle's next action (well-formed text) from the current state.

The public ``reset``/``step`` add what every env needs and no env should re-implement: per-env seeding, applying
a pending complexity level, turn counting, truncation at ``max_turns``, ``info["success"]`` at episode end, and
containment of malformed actions.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np

from gymverse.actions import ActionFormatError
from gymverse.complexity import MAX_LEVEL, MIN_LEVEL, ComplexitySpec, check_level
from gymverse.play import play

Domain = Literal["game", "algorithm", "logic", "tool-use", "other"]
DOMAINS: tuple[str, ...] = ("game", "algorithm", "logic", "tool-use", "other")

SUCCESS_REWARD = 1.0
FORMAT_PENALTY = -0.1


@dataclass(frozen=True)
class EnvMetadata:
    """Static description of an environment family member."""

    name: str
    family: str
    domain: Domain
    description: str
    action_format: str = r"\boxed{...}"
    max_turns: int = 50
    reward_range: tuple[float, float] = (FORMAT_PENALTY, SUCCESS_REWARD)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the metadata."""
        return {
            "name": self.name,
            "family": self.family,
            "domain": self.domain,
            "description": self.description,
            "action_format": self.action_format,
            "max_turns": self.max_turns,
            "reward_range": list(self.reward_range),
            "extra": dict(self.extra),
        }


class StepResult(NamedTuple):
    """Result of `Env.step`; unpacks as Gymnasium's 5-tuple."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        """True when the episode ended for any reason."""
        return self.terminated or self.truncated


class Env(ABC):
    """Base class of every GymVerse text environment. See the module docstring for the subclass contract."""

    metadata: ClassVar[EnvMetadata]
    #: ``{name: (value_at_level_1, value_at_level_10)}`` or ``{name: [v1, ..., v10]}``.
    complexity_params: ClassVar[Mapping[str, Any]] = {}
    #: Optional randomization per param (same units as the param), drawn from the env's own RNG at reset.
    param_variance: ClassVar[Mapping[str, float]] = {}
    format_penalty: ClassVar[float] = FORMAT_PENALTY

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        self._level = check_level(complexity)
        self._pending_level: int | None = None
        self._seed = seed
        self.rng: np.random.Generator = np.random.default_rng(seed)
        self._max_turns_override = max_turns
        self.params: dict[str, Any] = {}
        self.turn = 0
        self.done = False
        self._needs_reset = True

    # ----------------------------------------------------------------- complexity
    @classmethod
    def complexity_spec(cls) -> ComplexitySpec:
        """The declared complexity parameters as a `ComplexitySpec`."""
        return ComplexitySpec(dict(cls.complexity_params), dict(cls.param_variance))

    @property
    def complexity(self) -> int:
        """The level of the current (or next, if a change is pending) episode."""
        return self._pending_level if self._pending_level is not None else self._level

    def set_complexity(self, level: int) -> None:
        """Request complexity `level` (1..10); it takes effect at the next `reset`."""
        self._pending_level = check_level(level)

    @property
    def max_turns(self) -> int:
        """Turn budget of the current episode (constructor override, else a `max_turns` param, else metadata)."""
        if self._max_turns_override is not None:
            return self._max_turns_override
        if "max_turns" in self.params:
            return int(self.params["max_turns"])
        return self.metadata.max_turns

    # ----------------------------------------------------------------- episode API
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; `seed` reseeds this env's own RNG (same seed, same instance)."""
        if seed is not None:
            self._seed = seed
            self.rng = np.random.default_rng(seed)
        if self._pending_level is not None:
            self._level, self._pending_level = self._pending_level, None
        self.params = self.complexity_spec().resolve(self._level, self.rng)
        self.turn = 0
        self.done = False
        self._needs_reset = False
        obs, info = self._reset()
        info.setdefault("complexity", self._level)
        info.setdefault("turn", 0)
        return obs, info

    def step(self, action: str) -> StepResult:
        """Apply one text action; malformed actions yield a format-error observation, never an exception."""
        if self._needs_reset:
            raise RuntimeError(f"{type(self).__name__}.step() called before reset()")
        if self.done:
            raise RuntimeError(f"{type(self).__name__}.step() called after the episode ended; call reset()")
        if not isinstance(action, str):
            action = str(action)
        self.turn += 1
        try:
            result = self._step(action)
        except ActionFormatError as err:
            result = StepResult(
                f"Invalid action: {err}. Expected format: {self.metadata.action_format}",
                float(self.format_penalty),
                False,
                False,
                {"format_error": True, "error_message": str(err)},
            )
        obs, reward, terminated, truncated, info = result
        if not terminated and not truncated and self.turn >= self.max_turns:
            truncated = True
            obs = f"{obs}\nTurn limit of {self.max_turns} reached."
        info.setdefault("format_error", False)
        info["turn"] = self.turn
        info["complexity"] = self._level
        if terminated or truncated:
            info["success"] = bool(info.get("success", False))
            self.done = True
        return StepResult(obs, float(reward), bool(terminated), bool(truncated), info)

    @abstractmethod
    def _reset(self) -> tuple[str, dict[str, Any]]:
        """Build a fresh instance from ``self.params`` with ``self.rng``."""

    @abstractmethod
    def _step(self, action: str) -> StepResult:
        """Apply one action; raise `ActionFormatError` for malformed text."""

    @abstractmethod
    def solve(self) -> str:
        """Oracle: the next well-formed action that leads to success from the current state."""

    def sample_random_action(self) -> str:
        """A random (not necessarily useful) well-formed action, drawn from this env's RNG."""
        return r"\boxed{" + str(int(self.rng.integers(0, 10))) + "}"

    def close(self) -> None:  # noqa: B027 - optional hook, most envs hold no resources
        """Release resources held by the env."""

    # ----------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """A snapshot of everything that determines future transitions (RNG included)."""
        return copy.deepcopy(self.__dict__)

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state`."""
        self.__dict__.clear()
        self.__dict__.update(copy.deepcopy(dict(state)))

    def clone(self) -> Env:
        """An independent copy in the same state (for GRPO-style branching)."""
        return copy.deepcopy(self)

    # ----------------------------------------------------------------- misc
    @property
    def unwrapped(self) -> Env:
        """The base environment (itself)."""
        return self

    @property
    def seed_value(self) -> int | None:
        """The last seed given to the constructor or `reset`."""
        return self._seed

    def __repr__(self) -> str:
        return f"<{type(self).__name__} complexity={self.complexity}>"

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Wrapper(Env):
    """Transparent wrapper: every attribute not defined on the wrapper is looked up on the wrapped env, live."""

    def __init__(self, env: Env) -> None:  # no super().__init__: the wrapper owns no RNG or episode state
        self.env = env

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails, so wrapper attributes shadow and the rest stays live.
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def metadata(self) -> EnvMetadata:  # type: ignore[override]
        """The wrapped env's metadata."""
        return self.env.metadata

    @property
    def unwrapped(self) -> Env:
        """The base environment under every wrapper."""
        return self.env.unwrapped

    @property
    def complexity(self) -> int:
        """Complexity of the base env."""
        return self.env.complexity

    @property
    def max_turns(self) -> int:
        """Turn budget of the wrapped env."""
        return self.env.max_turns

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        """Resolved complexity params of the base env."""
        return self.env.params

    @property
    def format_penalty(self) -> float:  # type: ignore[override]
        """The wrapped env's format penalty (the class default inherited from `Env` would shadow it)."""
        return self.env.format_penalty

    def set_complexity(self, level: int) -> None:
        """Forward to the wrapped env (and so to the base env)."""
        self.env.set_complexity(level)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Forward to the wrapped env."""
        return self.env.reset(seed=seed)

    def step(self, action: str) -> StepResult:
        """Forward to the wrapped env."""
        return self.env.step(action)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError("wrappers forward reset() to the wrapped env")

    def _step(self, action: str) -> StepResult:
        raise NotImplementedError("wrappers forward step() to the wrapped env")

    def solve(self) -> str:
        """The base env's oracle action."""
        return self.env.solve()

    def sample_random_action(self) -> str:
        """Forward to the wrapped env."""
        return self.env.sample_random_action()

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    def get_state(self) -> dict[str, Any]:
        """Wrapped env's state plus this wrapper's own fields."""
        own = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if k != "env"}
        return {"env": self.env.get_state(), "wrapper": own}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state`."""
        self.env.set_state(state["env"])
        self.__dict__.update(copy.deepcopy(dict(state["wrapper"])))

    def clone(self) -> Env:
        """An independent copy of the whole wrapper stack."""
        return copy.deepcopy(self)

    def wrappers(self) -> Iterator[Wrapper]:
        """The wrapper stack from outermost to innermost."""
        node: Env = self
        while isinstance(node, Wrapper):
            yield node
            node = node.env

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


def run_oracle(env: Env, seed: int | None = None, max_steps: int | None = None) -> list[StepResult]:
    """Reset `env` and follow its oracle to the end of the episode; returns every step."""
    return play(env, lambda e, _obs: e.solve(), seed=seed, max_steps=max_steps).reraise().steps


__all__ = [
    "DOMAINS",
    "FORMAT_PENALTY",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "SUCCESS_REWARD",
    "Domain",
    "Env",
    "EnvMetadata",
    "StepResult",
    "Wrapper",
    "run_oracle",
]
