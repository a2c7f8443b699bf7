"""The environment contract: `Env` (the authoring template), `Wrapper` (the one wrapper base), and re-exports of
`EnvLike`, `StepResult` and `EnvMetadata`.

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

``max_turns`` is the env's turn cap, the one an env enforces (Gymnasium's ``max_episode_steps``): a constructor or
``make(env_id, max_turns=n)`` override, else a ``max_turns`` complexity param, else ``metadata.max_turns``. A
training run caps turns on top of it with `run_episode`'s ``horizon``; there is no time-limit wrapper.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import numpy as np

from gymverse.actions import ActionFormatError
from gymverse.complexity import MAX_LEVEL, MIN_LEVEL, ComplexitySpec, check_level
from gymverse.contract import DOMAINS, FORMAT_PENALTY, SUCCESS_REWARD, Domain, EnvMetadata, StepResult
from gymverse.play import play
from gymverse.protocol import EnvLike, is_env_like


class EpisodeBookkeeping:
    """Level (current and requested), seed and generator, turn budget, params, turn and done: what `Env` keeps and a
    proxy of an episode run elsewhere (`RemoteEnv`) mirrors, so that both apply one rule for levels and budgets."""

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
        return self._declared_max_turns()

    def _declared_max_turns(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} declares no turn budget")

    @property
    def seed_value(self) -> int | None:
        """The last seed given to the constructor or `reset`."""
        return self._seed

    def sample_random_action(self) -> str:
        """A random (not necessarily useful) well-formed action, drawn from this env's RNG."""
        return r"\boxed{" + str(int(self.rng.integers(0, 10))) + "}"


class Env(EpisodeBookkeeping, ABC):
    """Base class of every GymVerse text environment. See the module docstring for the subclass contract."""

    #: Usually a class attribute; an env whose metadata is known only once built (the GEM adapter: the wrapped
    #: GEM object's class names it) sets it in ``__init__``, so it is declared as an attribute, not a ClassVar.
    metadata: EnvMetadata
    #: ``{name: (value_at_level_1, value_at_level_10)}`` or ``{name: [v1, ..., v10]}``.
    complexity_params: ClassVar[Mapping[str, Any]] = {}
    #: Optional randomization per param (same units as the param), drawn from the env's own RNG at reset.
    param_variance: ClassVar[Mapping[str, float]] = {}
    format_penalty: ClassVar[float] = FORMAT_PENALTY

    # ----------------------------------------------------------------- complexity
    @classmethod
    def complexity_spec(cls) -> ComplexitySpec:
        """The declared complexity parameters as a `ComplexitySpec`."""
        return ComplexitySpec(dict(cls.complexity_params), dict(cls.param_variance))

    def _declared_max_turns(self) -> int:
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

    def close(self) -> None:
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

    def __repr__(self) -> str:
        return f"<{type(self).__name__} complexity={self.complexity}>"

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Wrapper:
    """The one wrapper base: implements `EnvLike` by explicit forwarding to the wrapped env ``self.env``.

    Every member of `EnvLike` is forwarded; nothing else is. A wrapper's own fields stay on the wrapper (keep them
    private and expose them as properties). Reach any other attribute of the stack explicitly, as Gymnasium 1.0
    does: `get_wrapper_attr` reads it from the outermost layer that has it, `set_wrapper_attr` writes it on that
    layer; both raise `AttributeError` naming the stack when no layer has it, so a typo never silently creates a
    field on the wrong layer.
    """

    #: Own fields shared by reference between clones and left out of state snapshots (static config such as a
    #: tokenizer): deep-copying them on every branch of a GRPO group would be slow and pointless.
    _shared_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, env: EnvLike) -> None:
        if not is_env_like(env):
            raise TypeError(f"{type(self).__name__} wraps an env (EnvLike), got {type(env).__name__}")
        self.env = env

    # ----------------------------------------------------------------- explicit attribute access
    def get_wrapper_attr(self, name: str) -> Any:
        """The attribute `name` of the outermost layer of the stack (this wrapper first) that has it."""
        for layer in self._layers():
            if _has_own(layer, name):
                return getattr(layer, name)
        raise AttributeError(f"no layer of {self!r} has an attribute {name!r}")

    def set_wrapper_attr(self, name: str, value: Any) -> None:
        """Set `name` on the outermost layer of the stack that has it (no layer has it: `AttributeError`)."""
        for layer in self._layers():
            if _has_own(layer, name) and not _read_only(layer, name):
                setattr(layer, name, value)
                return
        raise AttributeError(f"no layer of {self!r} has an attribute {name!r} to set")

    def _layers(self) -> Iterator[object]:
        node: object = self
        while isinstance(node, Wrapper):
            yield node
            node = node.env
        yield node

    # ----------------------------------------------------------------- forwarded EnvLike members
    @property
    def metadata(self) -> EnvMetadata:
        """The wrapped env's metadata."""
        return self.env.metadata

    @property
    def unwrapped(self) -> EnvLike:
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
    def params(self) -> dict[str, Any]:
        """Resolved complexity params of the base env."""
        return self.env.params

    @property
    def format_penalty(self) -> float:
        """The wrapped env's format penalty."""
        return self.env.format_penalty

    @property
    def turn(self) -> int:
        """Turns taken in the wrapped env's episode."""
        return self.env.turn

    @property
    def done(self) -> bool:
        """Whether the wrapped env's episode ended."""
        return self.env.done

    @property
    def seed_value(self) -> int | None:
        """The wrapped env's last seed."""
        return self.env.seed_value

    def complexity_spec(self) -> ComplexitySpec:
        """The wrapped env's declared complexity parameters."""
        return self.env.complexity_spec()

    def set_complexity(self, level: int) -> None:
        """Forward to the wrapped env (and so to the base env)."""
        self.env.set_complexity(level)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Forward to the wrapped env."""
        return self.env.reset(seed=seed)

    def step(self, action: str) -> StepResult:
        """Forward to the wrapped env."""
        return self.env.step(action)

    def solve(self) -> str:
        """The base env's oracle action."""
        return self.env.solve()

    def sample_random_action(self) -> str:
        """Forward to the wrapped env."""
        return self.env.sample_random_action()

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()

    # ----------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        """Wrapped env's state plus this wrapper's own (non-shared) fields."""
        own = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if k != "env" and k not in self._shared_fields}
        return {"env": self.env.get_state(), "wrapper": own}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state` (shared fields are kept as they are)."""
        self.env.set_state(state["env"])
        self.__dict__.update(copy.deepcopy(dict(state["wrapper"])))

    def clone(self) -> EnvLike:
        """An independent copy of the whole stack; shared fields of every wrapper in it are not copied."""
        memo: dict[int, Any] = {}
        for w in self.wrappers():
            for name in w._shared_fields:
                obj = w.__dict__.get(name)
                if obj is not None:
                    memo[id(obj)] = obj
        return copy.deepcopy(self, memo)

    def wrappers(self) -> Iterator[Wrapper]:
        """The wrapper stack from outermost to innermost."""
        node: EnvLike = self
        while isinstance(node, Wrapper):
            yield node
            node = node.env

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"

    def __enter__(self) -> Wrapper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _has_own(layer: object, name: str) -> bool:
    """True when `layer` itself (its instance fields or its class) defines `name`, without asking the layers below."""
    return name in getattr(layer, "__dict__", {}) or hasattr(type(layer), name)


def _read_only(layer: object, name: str) -> bool:
    """True for a property without a setter (a wrapper's forwarded read): the write belongs further down."""
    prop = getattr(type(layer), name, None)
    return isinstance(prop, property) and prop.fset is None and name not in getattr(layer, "__dict__", {})


def run_oracle(env: EnvLike, seed: int | None = None, max_steps: int | None = None) -> list[StepResult]:
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
    "EnvLike",
    "EnvMetadata",
    "EpisodeBookkeeping",
    "StepResult",
    "Wrapper",
    "run_oracle",
]
