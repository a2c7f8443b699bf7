"""The env session pool every rollout uses, and the one fault-containment implementation behind it.

`EnvPool` runs episode sessions (`PoolSession`) on a bounded thread pool with step timeouts: a raising or hung env
ends its episode ``truncated`` with ``info["error"]`` instead of raising (`gymverse.pool.faults`). `EnvSlot`
(`gymverse.pool.slot`) is the per-env semantics (building, seeding, autoreset, containment) that the pool and
every lockstep backend of gymverse-vector (`make_vec`) share.
"""

from gymverse.pool.blocking import declares_nonblocking, is_native_async
from gymverse.pool.envpool import (
    DEFAULT_RESET_TIMEOUT,
    DEFAULT_STEP_TIMEOUT,
    EnvPool,
    PoolSession,
    configure_shared_pool,
    pool_size_for,
    shared_pool,
)
from gymverse.pool.faults import StepTimeout, VectorError, WorkerCrashed
from gymverse.pool.slot import AUTORESET_MODES, EnvRecipe, EnvSlot, WrapperFn, episode_seed

__all__ = [
    "AUTORESET_MODES",
    "DEFAULT_RESET_TIMEOUT",
    "DEFAULT_STEP_TIMEOUT",
    "EnvPool",
    "EnvRecipe",
    "EnvSlot",
    "PoolSession",
    "StepTimeout",
    "VectorError",
    "WorkerCrashed",
    "WrapperFn",
    "configure_shared_pool",
    "declares_nonblocking",
    "episode_seed",
    "is_native_async",
    "pool_size_for",
    "shared_pool",
]
