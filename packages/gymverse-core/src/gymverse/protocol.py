"""`EnvLike`: what every env-like object offers, whether it authors an episode (`Env`) or forwards one.

`Env` is the authoring template: subclasses fill in ``_reset``/``_step``/``solve`` and inherit seeding, turn
counting and format-error containment. Objects that only *forward* an episode (wrappers, an env served over
HTTP, an env hosted in a sandbox, a GEM env seen through the adapter) do none of that themselves, so they do not
subclass `Env`; they implement this protocol instead, and every consumer that accepts them (registry, pool,
checker, server) is typed against it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Protocol, TypeGuard

from gymverse.complexity import ComplexitySpec
from gymverse.contract import EnvMetadata, StepResult


class EnvLike(Protocol):
    """The env API a consumer may rely on: an `Env`, a `Wrapper` stack or a proxy of a remote env."""

    @property
    def metadata(self) -> EnvMetadata:
        """Static description of the env."""
        ...

    @property
    def format_penalty(self) -> float:
        """Reward of a malformed action."""
        ...

    @property
    def complexity(self) -> int:
        """The level of the current (or next, if a change is pending) episode."""
        ...

    def complexity_spec(self) -> ComplexitySpec:
        """The declared complexity parameters (empty for an env that declares none here)."""
        ...

    def set_complexity(self, level: int) -> None:
        """Request complexity `level` (1..10) for the next `reset`."""
        ...

    @property
    def max_turns(self) -> int:
        """Turn budget of the current episode."""
        ...

    @property
    def params(self) -> dict[str, Any]:
        """Resolved complexity params of the current episode."""
        ...

    @property
    def turn(self) -> int:
        """Turns taken in the current episode."""
        ...

    @property
    def done(self) -> bool:
        """Whether the current episode ended."""
        ...

    @property
    def seed_value(self) -> int | None:
        """The last seed given to the constructor or `reset`."""
        ...

    @property
    def unwrapped(self) -> EnvLike:
        """The innermost env (itself for anything that wraps nothing)."""
        ...

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; same seed, same instance."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one text action."""
        ...

    def solve(self) -> str:
        """The oracle's next action."""
        ...

    def sample_random_action(self) -> str:
        """A random well-formed action."""
        ...

    def close(self) -> None:
        """Release what the env holds."""
        ...

    def get_state(self) -> dict[str, Any]:
        """A snapshot of everything that determines future transitions."""
        ...

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state`."""
        ...

    def clone(self) -> EnvLike:
        """An independent copy in the same state."""
        ...

    def __enter__(self) -> Any:
        """The env itself, closed on exit."""
        ...

    def __exit__(self, *exc: object) -> None:
        """Close the env."""
        ...


#: The members every `EnvLike` has, for the runtime check.
ENV_LIKE_MEMBERS: tuple[str, ...] = tuple(
    name for name in vars(EnvLike) if not name.startswith("_") and name not in ("mro",)
)


#: The methods among them: what the runtime check looks for. Data members are left to the type checker, because
#: an env may legitimately lack one until it is used (an `Env` subclass that declares no ``metadata`` still runs).
ENV_LIKE_METHODS: tuple[str, ...] = tuple(
    name for name in ENV_LIKE_MEMBERS if not isinstance(vars(EnvLike)[name], property)
)


def is_env_like(obj: object) -> TypeGuard[EnvLike]:
    """True when `obj` (an instance, not a class) has every `EnvLike` method; looked up statically, so no property
    runs (a proxy's ``metadata`` may be a network call)."""
    if isinstance(obj, type):
        return False
    for name in ENV_LIKE_METHODS:
        try:
            inspect.getattr_static(obj, name)
        except AttributeError:
            return False
    return True


__all__ = ["ENV_LIKE_MEMBERS", "ENV_LIKE_METHODS", "EnvLike", "is_env_like"]
