"""Where agent instances get their env sessions: one `gymverse.vector.EnvPool` per process.

The pool runs blocking envs in worker threads (vLLM's event loop keeps generating meanwhile) and turns an env
that raises or hangs into a truncated step with ``info["error"]``. Without it (an older gymverse-core), a local
`InProcessSession` in a worker thread does the same job with exceptions caught by the instance.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: Open sessions per process at most (further episodes wait); OpenRLHF runs every sample of a batch at once.
MAX_SESSIONS = int(os.environ.get("GYMVERSE_OPENRLHF_MAX_SESSIONS", "4096"))
#: Seconds one env call may take before its episode is ended as failed (0: no limit).
STEP_TIMEOUT = float(os.environ.get("GYMVERSE_OPENRLHF_STEP_TIMEOUT", "120"))

_lock = threading.Lock()
_pool: Any = None


def _get_pool() -> Any:
    global _pool
    with _lock:
        if _pool is None:
            from gymverse.vector import EnvPool

            _pool = EnvPool(MAX_SESSIONS, step_timeout=STEP_TIMEOUT or None)
        return _pool


async def open_session(env_id: str, seed: int, complexity: int | None) -> Any:
    """An `EnvSessionLike` on `env_id` at `complexity` (None: the env's default), seeded with `seed`."""
    from gymverse.registry import list_envs

    if env_id not in list_envs():
        raise ValueError(f"GymVerse label names unknown env {env_id!r}; available: {list_envs()}")
    try:
        pool = _get_pool()
    except ImportError:
        pool = None
    if pool is not None:
        return await pool.session(env_id, seed=seed, complexity=complexity)
    from gymverse.rollout import InProcessSession

    kwargs = {} if complexity is None else {"complexity": complexity}
    return InProcessSession.make(env_id, offload=True, **kwargs)
