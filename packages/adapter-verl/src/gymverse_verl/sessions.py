"""Env sessions for agent loops: one process-wide `gymverse.vector.EnvPool`, one session per episode.

verl builds a fresh agent-loop object per sample, so the pool lives at module level (one per agent-loop worker
process). Blocking envs run in the pool's threads and never stall the worker's event loop; a raising or hung env
ends its episode (truncated, ``info["error"]``) instead of the worker.
"""

from __future__ import annotations

import threading
from typing import Any

from gymverse.vector import EnvPool, EnvSession

_lock = threading.Lock()
_pool: EnvPool | None = None


def env_pool(max_concurrency: int = 256, step_timeout: float | None = None) -> EnvPool:
    """The process-wide pool (created on first use with these limits)."""
    global _pool
    with _lock:
        if _pool is None or _pool.closed:
            _pool = EnvPool(max_concurrency, step_timeout=step_timeout)
        return _pool


async def open_session(
    env_id: str,
    *,
    seed: int | None,
    complexity: int | None,
    env_kwargs: dict[str, Any] | None = None,
    max_concurrency: int = 256,
    step_timeout: float | None = None,
) -> EnvSession:
    """A session on `env_id` whose next reset uses `complexity` (None: the env's own level)."""
    pool = env_pool(max_concurrency, step_timeout)
    return await pool.session(env_id, seed=seed, complexity=complexity, **(env_kwargs or {}))
