"""Episode sessions: the one `Session` protocol, an in-process implementation, and `open_session` on the shared pool.

A session is one env slot with an async episode API, the same shape everywhere:

* ``set_complexity(level)`` (sync): use `level` from the next reset on; it lands on the base env under wrappers.
* ``await reset(seed)`` -> ``(observation, info)`` with ``info["complexity"]`` = the level in effect.
* ``await step(text)`` -> ``(observation, reward, terminated, truncated, info)``.
* ``await close()``: free the slot (idempotent); sessions are async context managers too.

`gymverse.pool.PoolSession` (pool sessions: thread pool, step timeouts, fault isolation), `InProcessSession`
(a local `Env`, e.g. for evaluation) and `gymverse.client.RemoteSession` (an env served over HTTP) implement it;
the server's `ClientLease` is not a session but holds one per client. Adapters open pool sessions with
`open_session`, which uses the process-wide pool (`gymverse.pool.shared_pool`, limits set once with
`configure_shared_pool`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gymverse.protocol import EnvLike

if TYPE_CHECKING:
    from gymverse.pool import PoolSession

logger = logging.getLogger(__name__)


@runtime_checkable
class Session(Protocol):
    """What `run_episode` needs from an env slot (see the module docstring)."""

    @property
    def env_id(self) -> str:
        """The env id (``family:Name``)."""
        ...

    def set_complexity(self, level: int) -> None:
        """Use complexity `level` from the next reset on."""
        ...

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; returns (observation, info)."""
        ...

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one text action; returns (observation, reward, terminated, truncated, info)."""
        ...

    async def close(self) -> None:
        """Release the slot."""
        ...


def default_env_id(env: EnvLike) -> str:
    """``family:Name`` from an env's metadata."""
    meta = env.metadata
    return f"{meta.family}:{meta.name}"


class InProcessSession:
    """`Session` over a local `Env` (possibly wrapped); ``offload=True`` runs env calls in a worker thread."""

    def __init__(self, env: EnvLike, env_id: str | None = None, *, offload: bool = False) -> None:
        self.env = env
        self._env_id = env_id if env_id is not None else default_env_id(env)
        self.offload = offload
        self.closed = False

    @property
    def env_id(self) -> str:
        """The session's env id."""
        return self._env_id

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
        return obs, {**info, "complexity": self.env.unwrapped.complexity}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the env."""
        res = await asyncio.to_thread(self.env.step, action) if self.offload else self.env.step(action)
        obs, reward, terminated, truncated, info = res
        return obs, float(reward), bool(terminated), bool(truncated), info

    async def close(self) -> None:
        """Close the env (idempotent)."""
        if not self.closed:
            self.closed = True
            self.env.close()

    async def __aenter__(self) -> InProcessSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class FailedSession:
    """A session whose env could not even be built: its reset reports the error, so the episode is error-truncated."""

    def __init__(self, env_id: str, error: str) -> None:
        self._env_id = env_id
        self.error = error

    @property
    def env_id(self) -> str:
        """The env id that failed."""
        return self._env_id

    def set_complexity(self, level: int) -> None:
        """Nothing to configure."""

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """The error, as a failed reset."""
        return f"The environment could not be started: {self.error}", {"error": self.error, "reset_failed": True}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Never reached: `run_episode` stops at the failed reset."""
        raise RuntimeError(f"{self._env_id}: the session failed to open ({self.error})")

    async def close(self) -> None:
        """Nothing to release."""

    async def __aenter__(self) -> FailedSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


async def open_session(
    env_id: str, *, seed: int | None = None, complexity: int | None = None, **env_kwargs: Any
) -> PoolSession | FailedSession:
    """A session on `env_id` from the process-wide pool; an env that cannot be built gives a `FailedSession`.

    Waits while the pool's ``max_concurrency`` sessions are open. Close it (``async with``) to free the slot.
    """
    from gymverse.pool import shared_pool

    try:
        return await shared_pool().session(env_id, seed=seed, complexity=complexity, **env_kwargs)
    except Exception as exc:  # unknown id, bad kwargs, bad level: this episode fails, the rollout goes on
        logger.warning("GymVerse could not open a session on %s: %s: %s", env_id, type(exc).__name__, exc)
        return FailedSession(env_id, f"{type(exc).__name__}: {exc}")


def make_sessions(env_ids: list[str], *, offload: bool = False, **kwargs: Any) -> list[InProcessSession]:
    """One `InProcessSession` per id in `env_ids` (ids may repeat)."""
    return [InProcessSession.make(e, offload=offload, **kwargs) for e in env_ids]
