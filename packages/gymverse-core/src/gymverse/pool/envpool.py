"""Episode-level async sessions: ``session = await pool.session(env_id, seed=..., complexity=...)``.

Per-episode rollout engines (verl agent loops, OpenRLHF agent instances, RL2 env steps) run one coroutine per
episode with no lockstep barrier. `EnvPool` bounds how many sessions are open at once and runs blocking envs in a
shared thread pool (native ``async def astep/areset`` envs are awaited directly). The pool is bound to no event
loop: sessions may be opened from any running loop, including several loops in different threads at once.
Failures are contained as in the vector backends: a raising or hung env ends the episode with ``truncated=True``
and ``info["error"]``, and the next ``reset`` builds a fresh env.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from gymverse.complexity import check_level
from gymverse.core import StepResult
from gymverse.pool.batched import BatchedCalls
from gymverse.pool.blocking import BlockingRunner, declares_nonblocking, is_native_async
from gymverse.pool.faults import StepTimeout, VectorError
from gymverse.pool.slot import EnvRecipe, EnvSlot, WrapperFn, base_seeds, check_step_timeout
from gymverse.pool.spotcheck import DEFAULT_EVERY, SpotChecks, accepts_known_bad
from gymverse.pycompat import TIMEOUT_ERRORS


class _Limiter:
    """A counting semaphore usable from any event loop (asyncio's own binds to one loop)."""

    def __init__(self, permits: int) -> None:
        self._lock = threading.Lock()
        self._free = permits
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                if (loop, fut) in self._waiters:
                    self._waiters.remove((loop, fut))
            raise  # a permit already handed over is returned by `_grant`, which sees the cancelled future

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                loop, fut = self._waiters.popleft()
                loop.call_soon_threadsafe(self._grant, fut)
                return
            self._free += 1

    def _grant(self, fut: asyncio.Future[None]) -> None:
        if fut.done():  # cancelled while the permit was in flight: pass it on
            self.release()
        else:
            fut.set_result(None)


class PoolSession:
    """One env for one rollout coroutine: ``set_complexity(level)``, ``await reset()``, ``await step(text)``,
    ``await close()`` (the `gymverse.rollout.Session` protocol)."""

    def __init__(self, pool: EnvPool, slot: EnvSlot) -> None:
        self._pool = pool
        self._slot = slot
        self.closed = False
        self._kind: tuple[Any, str] | None = None  # (env, how its calls run): looked up once per env object

    @property
    def env_id(self) -> str:
        """The session's env id."""
        return self._slot.recipe.env_id

    async def _call(self, method: str, arg: Any) -> Any:
        env = self._slot._env()
        timeout = self._pool.reset_timeout if method == "reset" else self._pool.step_timeout
        name = "reset_timeout" if method == "reset" else "step_timeout"
        if self._kind is None or self._kind[0] is not env:  # a failed env is rebuilt: a new object
            kind = "async" if is_native_async(env) else "batched" if declares_nonblocking(env) else "thread"
            self._kind = (env, kind)
        kind = self._kind[1]
        if kind != "async":
            # timed from when the call starts, on a pool that replaces threads lost to hung calls; cheap envs share
            # one thread hop per event-loop iteration (`BatchedCalls`)
            if kind == "batched":
                return await self._pool._batched.call(timeout, getattr(env, method), arg, limit=name)
            return await self._pool._runner.call(timeout, getattr(env, method), arg, limit=name)
        aw = getattr(env, "a" + method)(arg)
        if timeout is None:
            return await aw
        try:
            return await asyncio.wait_for(aw, timeout)
        except TIMEOUT_ERRORS:  # asyncio.TimeoutError is not the builtin one on Python 3.10
            raise StepTimeout(f"env call exceeded {name}={timeout}s") from None

    def set_complexity(self, level: int) -> None:
        """Use complexity `level` from the next reset on (it lands on the base env under any wrappers)."""
        self._check()
        self._slot.set_complexity(check_level(level))

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (a seed reseeds; None continues the env's RNG); a failure is reported in the info."""
        self._check()
        slot = self._slot
        slot.use_seed(seed)
        slot.episode += 1
        try:
            _, reset_seed = slot.prepare_reset()
            obs, info = await self._call("reset", reset_seed)
            slot.reset_done(slot._env())
        except Exception as exc:
            return slot.reset_failed(exc)
        if self._pool.spot_checks.due(self.env_id):
            await self._spot_check(reset_seed)
        return obs, {**info, "complexity": slot.level}

    async def _spot_check(self, seed: int | None) -> None:
        """Play the known-bad answers on a shadow copy of this env (`gymverse.pool.spotcheck`); its failures
        are the shadow's, never this episode's."""
        slot = self._slot
        # bounded like one call, not a reset plus steps: a shadow that hangs delays this episode by one step's time
        limits = [t for t in (self._pool.step_timeout, self._pool.reset_timeout) if t]
        timeout = min(limits) if limits else None
        try:
            accepted = await self._pool._runner.call(timeout, accepts_known_bad, slot.recipe, slot.level, seed,
                                                     limit="reset_timeout")  # fmt: skip
        except Exception:  # a shadow that raises or hangs is no evidence either way
            return
        self._pool.spot_checks.record(self.env_id, accepted)

    async def step(self, action: str) -> StepResult:
        """Apply one action; env failures end the episode (truncated, ``info["error"]``) instead of raising."""
        self._check()
        slot = self._slot
        if slot.ended:
            raise VectorError(f"session {self.env_id}: the episode is over (or never started); call reset() first")
        try:
            result = StepResult(*await self._call("step", action))
        except Exception as exc:
            result = StepResult(*slot.fail_step(exc))
        slot.finish(result.terminated, result.truncated)
        return result

    def _check(self) -> None:
        if self.closed:
            raise VectorError(f"session {self.env_id} is closed")
        if self._pool.closed:  # misuse, not an env failure: it must not end the episode as the env's fault
            raise VectorError(f"session {self.env_id}: the pool is closed (EnvPool.close() was called)")

    async def close(self) -> None:
        """Close the env and free the pool slot (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self._slot.close()
        self._pool._release()

    async def __aenter__(self) -> PoolSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


#: Seconds one env step may take before its episode ends with ``env_error`` (safe default: a hung env never
#: stalls a rollout forever; pass None for no limit).
DEFAULT_STEP_TIMEOUT = 30.0
#: Seconds a reset (the env's build included) may take before the episode ends with ``reset_error``.
DEFAULT_RESET_TIMEOUT = 60.0


class EnvPool:
    """Hands out `PoolSession`s, at most `max_concurrency` open at once (further `session()` calls wait).

    Step and reset timeouts are on by default (`DEFAULT_STEP_TIMEOUT`, `DEFAULT_RESET_TIMEOUT`); None disables one.
    Every `spot_check_every`-th episode of an env id (the first included) also plays known-bad answers on a shadow
    copy of its env (`gymverse.pool.spotcheck`, `flagged`).
    """

    def __init__(
        self,
        max_concurrency: int = 64,
        *,
        max_workers: int | None = None,
        step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
        reset_timeout: float | None = DEFAULT_RESET_TIMEOUT,
        wrappers: Sequence[WrapperFn] = (),
        spot_check_every: int | None = DEFAULT_EVERY,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self.step_timeout = check_step_timeout(step_timeout)
        self.reset_timeout = check_step_timeout(reset_timeout)
        self.wrappers = tuple(wrappers)
        self._limiter = _Limiter(max_concurrency)
        self._runner = BlockingRunner(max_workers or min(max_concurrency, 64), "gymverse-session")
        self._batched = BatchedCalls(self._runner)
        self._recipes: dict[tuple[str, tuple[tuple[str, Any], ...]], EnvRecipe] = {}
        self._count_lock = threading.Lock()
        self.active = 0
        self.closed = False
        #: Known-bad-answer spot checks of the sessions' envs (`gymverse.pool.spotcheck`); None/0: off.
        self.spot_checks = SpotChecks(spot_check_every)

    def flagged(self) -> dict[str, list[str]]:
        """Env ids that accepted a known-bad answer in a spot check (they may behave only when evaluated)."""
        return self.spot_checks.flagged()

    def _recipe(self, env_id: str, kwargs: Mapping[str, Any]) -> EnvRecipe:
        key = (env_id, tuple(sorted(kwargs.items())))
        try:
            return self._recipes[key]
        except (KeyError, TypeError):  # TypeError: unhashable kwargs; resolve without caching
            recipe = EnvRecipe.resolve(env_id, kwargs, self.wrappers)
            with contextlib.suppress(TypeError):
                self._recipes[key] = recipe
            return recipe

    async def session(
        self, env_id: str, seed: int | None = None, complexity: int | None = None, **env_kwargs: Any
    ) -> PoolSession:
        """Open a session on `env_id` (waits while `max_concurrency` sessions are open)."""
        if self.closed:
            raise VectorError("EnvPool is closed")
        recipe = self._recipe(env_id, env_kwargs)  # unknown ids fail here, before taking a permit
        level = check_level(complexity) if complexity is not None else None
        await self._limiter.acquire()
        with self._count_lock:
            self.active += 1
        slot = EnvSlot(recipe, base_seeds(seed, 1)[0], "disabled")
        if level is not None:
            slot.set_complexity(level)
        return PoolSession(self, slot)

    def _release(self) -> None:
        with self._count_lock:
            self.active -= 1
        self._limiter.release()

    def close(self) -> None:
        """Stop the worker threads (open sessions can no longer run blocking envs); idempotent."""
        if not self.closed:
            self.closed = True
            self._runner.executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_shared_lock = threading.Lock()
_shared: EnvPool | None = None
_shared_config: dict[str, Any] = {
    "max_concurrency": 256,
    "step_timeout": DEFAULT_STEP_TIMEOUT,
    "reset_timeout": DEFAULT_RESET_TIMEOUT,
    "max_workers": None,
}


def _forget_shared_pool() -> None:
    """In a forked child: the parent's pool has no worker threads here, so the child builds its own on first use."""
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_shared_pool)


def configure_shared_pool(
    max_concurrency: int = 256,
    *,
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
    reset_timeout: float | None = DEFAULT_RESET_TIMEOUT,
    max_workers: int | None = None,
    replace: bool = False,
) -> None:
    """Set the limits of the process-wide pool; once the pool exists, only the same limits are accepted, unless
    `replace` closes it (its open sessions can no longer step) so that the next session starts a new one.

    Adapters size `max_concurrency` from their framework's batch settings (`pool_size_for`), so every episode of a
    rollout batch runs at once instead of queueing behind a too-small pool.
    """
    check_step_timeout(step_timeout)
    check_step_timeout(reset_timeout)
    config = {
        "max_concurrency": max_concurrency,
        "step_timeout": step_timeout,
        "reset_timeout": reset_timeout,
        "max_workers": max_workers,
    }
    with _shared_lock:
        if _shared is not None and not _shared.closed and config != _shared_config:
            if replace:
                _shared.close()
                _shared_config.update(config)
                return
            raise RuntimeError(
                f"the shared EnvPool already runs with {_shared_config}; it cannot be reconfigured to {config} "
                "(configure it once, before the first session)"
            )
        _shared_config.update(config)


def shared_pool() -> EnvPool:
    """The process-wide `EnvPool` every adapter opens its sessions from (created on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed:
            cfg = _shared_config
            _shared = EnvPool(
                cfg["max_concurrency"],
                step_timeout=cfg["step_timeout"],
                reset_timeout=cfg["reset_timeout"],
                max_workers=cfg["max_workers"],
            )
        return _shared


def pool_size_for(episodes_per_batch: int, *, floor: int = 64) -> int:
    """Sessions the shared pool needs so that a whole rollout batch runs at once (at least `floor`)."""
    if episodes_per_batch < 1:
        raise ValueError(f"episodes per batch must be >= 1, got {episodes_per_batch}")
    return max(int(episodes_per_batch), floor)
