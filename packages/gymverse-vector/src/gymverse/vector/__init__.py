"""Vectorized and async execution of GymVerse envs with per-env fault isolation.

``make_vec(env_id, num_envs, backend=...)`` builds a `VecEnv` on one of four backends sharing one semantics
(`gymverse.pool.slot.EnvSlot`), so the same seeds give the same transcripts everywhere:

* ``"sync"``: a plain loop in the caller's thread (the reference; fastest for cheap envs).
* ``"async"``: asyncio; native ``async def astep/areset`` envs are awaited, envs declaring
  ``nonblocking = True`` are stepped inline, other blocking envs run in a bounded pool.
* ``"process"``: worker processes hosting several envs each; CPU parallelism, crash and hang containment.
* ``"ray"``: Ray actors (``pip install 'gymverse-vector[ray]'``), same containment across a cluster.

`EnvPool` (episode-level async sessions for per-episode rollout engines) is gymverse-core's `gymverse.pool`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gymverse.manifest import expand_env_ids, is_manifest_path, read_manifest

# The session pool and fault containment live in gymverse-core (gymverse.pool): re-exported for `make_vec` users.
from gymverse.pool import (
    AUTORESET_MODES,
    DEFAULT_RESET_TIMEOUT,
    DEFAULT_STEP_TIMEOUT,
    EnvPool,
    EnvRecipe,
    PoolSession,
    StepTimeout,
    VectorError,
    WorkerCrashed,
    WrapperFn,
    configure_shared_pool,
    declares_nonblocking,
    episode_seed,
    is_native_async,
    pool_size_for,
    shared_pool,
)
from gymverse.protocol import EnvLike
from gymverse.vector.aio import AsyncVecEnv
from gymverse.vector.base import VecEnv, VecOptions, VecStepResult
from gymverse.vector.process import ProcessVecEnv
from gymverse.vector.sync import SyncVecEnv

BACKENDS: tuple[str, ...] = ("sync", "async", "process", "ray")


def make_vec(
    env_id: str | Callable[[], EnvLike] | Sequence[str | Callable[[], EnvLike]],
    num_envs: int | None = None,
    backend: str = "sync",
    *,
    wrappers: Sequence[WrapperFn] = (),
    seed: int | None = None,
    autoreset: str = "same_step",
    step_timeout: float | None = None,
    backend_options: Mapping[str, Any] | None = None,
    **env_kwargs: Any,
) -> VecEnv:
    """Build `num_envs` copies of `env_id` (or one env per id in a list) on `backend`.

    `seed` gives env ``i`` base seed ``seed + i``; `env_kwargs` go to every env's constructor; `backend_options`
    go to the backend (``num_workers``/``start_method`` for process, ``num_workers``/``actor_options`` for ray,
    ``max_workers`` for async).
    """
    if isinstance(env_id, str) and is_manifest_path(env_id):
        env_id = read_manifest(env_id)  # an evaluation's manifest: one env per passing entry
    elif not isinstance(env_id, str) and not callable(env_id):
        env_id = [e for item in env_id for e in (expand_env_ids([item]) if isinstance(item, str) else [item])]
    if isinstance(env_id, str) or callable(env_id):
        if num_envs is None:
            raise ValueError("num_envs is required when a single env id is given")
        ids: list[str | Callable[[], EnvLike]] = [env_id] * num_envs
    else:
        ids = list(env_id)
        if num_envs is not None and num_envs != len(ids):
            raise ValueError(f"num_envs={num_envs} does not match the {len(ids)} env ids given")
    if isinstance(num_envs, bool) or (num_envs is not None and num_envs < 1):
        raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    recipes = [EnvRecipe.resolve(e, env_kwargs, wrappers) for e in ids]
    opts = dict(backend_options or {})
    common: VecOptions = {"autoreset": autoreset, "seed": seed, "step_timeout": step_timeout}
    if backend == "sync":
        if opts:
            raise ValueError(f"the sync backend takes no backend_options, got {sorted(opts)}")
        return SyncVecEnv(recipes, **common)
    if backend == "async":
        return AsyncVecEnv(recipes, **common, **opts)
    if backend == "process":
        return ProcessVecEnv(recipes, **common, **opts)
    from gymverse.vector.ray_backend import RayVecEnv

    return RayVecEnv(recipes, **common, **opts)


__all__ = [
    "AUTORESET_MODES",
    "BACKENDS",
    "DEFAULT_RESET_TIMEOUT",
    "DEFAULT_STEP_TIMEOUT",
    "AsyncVecEnv",
    "EnvPool",
    "EnvRecipe",
    "PoolSession",
    "ProcessVecEnv",
    "StepTimeout",
    "SyncVecEnv",
    "VecEnv",
    "VecStepResult",
    "VectorError",
    "WorkerCrashed",
    "configure_shared_pool",
    "declares_nonblocking",
    "episode_seed",
    "is_native_async",
    "make_vec",
    "pool_size_for",
    "shared_pool",
]
