"""Episode sessions the collector drives: the `EnvSessionLike` protocol and an in-process implementation.

A session is one env slot with an async episode API. `gymverse.vector`'s `EnvPool` sessions (process, Ray or
remote backends) plug into the collector by satisfying the same protocol; `InProcessSession` runs a local `Env`
(wrappers included) in the event loop's thread, or in a worker thread with ``offload=True`` for slow envs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, runtime_checkable

from gymverse.core import Env


@runtime_checkable
class EnvSessionLike(Protocol):
    """What the collector needs from an env slot.

    ``set_complexity`` only records the level for the next ``reset`` (remote sessions may buffer it and send it
    along with the reset); ``reset`` must report the level actually in effect as ``info["complexity"]``.
    """

    env_id: str

    def set_complexity(self, level: int) -> None:
        """Use complexity `level` from the next reset on."""
        ...

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; returns (observation, info)."""
        ...

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one text action; returns (observation, reward, terminated, truncated, info)."""
        ...


def default_env_id(env: Env) -> str:
    """``family:Name`` from an env's metadata."""
    meta = env.metadata
    return f"{meta.family}:{meta.name}"


class InProcessSession:
    """`EnvSessionLike` over a local `Env` (possibly wrapped); complexity always lands on the base env."""

    def __init__(self, env: Env, env_id: str | None = None, *, offload: bool = False) -> None:
        self.env = env
        self.env_id = env_id if env_id is not None else default_env_id(env)
        self.offload = offload

    @classmethod
    def make(cls, env_id: str, *, offload: bool = False, **kwargs: Any) -> InProcessSession:
        """Build the env with `gymverse.make` and wrap it in a session."""
        from gymverse.registry import make

        return cls(make(env_id, **kwargs), env_id, offload=offload)

    def set_complexity(self, level: int) -> None:
        """Request `level` through the wrapper stack (wrappers forward to the base env)."""
        self.env.set_complexity(level)

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset; ``info["complexity"]`` is the base env's level, read from ``env.unwrapped``."""
        obs, info = await asyncio.to_thread(self.env.reset, seed) if self.offload else self.env.reset(seed)
        info = dict(info)
        info["complexity"] = self.env.unwrapped.complexity
        return obs, info

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the env."""
        res = await asyncio.to_thread(self.env.step, action) if self.offload else self.env.step(action)
        obs, reward, terminated, truncated, info = res
        return obs, float(reward), bool(terminated), bool(truncated), info

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def make_sessions(env_ids: list[str], *, offload: bool = False, **kwargs: Any) -> list[InProcessSession]:
    """One `InProcessSession` per id in `env_ids` (ids may repeat)."""
    return [InProcessSession.make(e, offload=offload, **kwargs) for e in env_ids]
