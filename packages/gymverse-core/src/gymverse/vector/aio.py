"""`AsyncVecEnv`: asyncio execution. Native ``async def astep/areset`` envs are awaited on the loop; blocking
envs run in a bounded thread pool. Use ``await venv.astep(...)`` inside a running loop, or the plain ``step``
anywhere (it runs on a private loop thread, so it also works when the caller is itself inside an event loop).

``step_timeout`` cancels a native coroutine; a blocking call cannot be interrupted, so its slot is abandoned to the
thread (whose late result is discarded) and a fresh env takes its place.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from gymverse.core import Env
from gymverse.vector.base import Actions, InProcessVecEnv, VecStepResult, base_seeds, check_step_timeout
from gymverse.vector.faults import InjectedFault, StepTimeout
from gymverse.vector.slot import EnvRecipe, EnvSlot, EnvStep

T = TypeVar("T")


def is_native_async(env: Env) -> bool:
    """True when the outermost env object itself defines coroutine ``astep`` and ``areset`` methods.

    Looked up on the type, so a wrapper that only forwards attributes never lets the inner env's coroutines
    bypass the wrapper's own ``step``.
    """
    return inspect.iscoroutinefunction(getattr(type(env), "astep", None)) and inspect.iscoroutinefunction(
        getattr(type(env), "areset", None)
    )


class AsyncVecEnv(InProcessVecEnv):
    """Envs driven concurrently by asyncio; `max_workers` bounds the threads used for blocking envs."""

    backend = "async"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        autoreset: str = "same_step",
        seed: int | None = None,
        step_timeout: float | None = None,
        max_workers: int | None = None,
    ) -> None:
        super().__init__(recipes, autoreset)
        check_step_timeout(step_timeout)
        workers = max_workers if max_workers is not None else min(self.num_envs, 128)
        if workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {workers}")
        self.step_timeout = step_timeout
        self.slots = [EnvSlot(r, s, self.autoreset) for r, s in zip(self.recipes, base_seeds(seed, self.num_envs))]
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gymverse-env")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.abandoned = 0  # blocking calls left running after a timeout
        self._native_types: dict[type, bool] = {}

    # ------------------------------------------------------------------ async public API
    async def areset(
        self, seed: int | Sequence[int] | None = None, indices: Sequence[int] | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Awaitable `reset`, run on the caller's event loop."""
        return await self._gather_reset(*self._prepare_reset(seed, indices))

    async def astep(self, actions: Actions) -> VecStepResult:
        """Awaitable `step`, run on the caller's event loop."""
        return await self._gather_step(*self._prepare_step(actions))

    # ------------------------------------------------------------------ loop plumbing
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="gymverse-async-vec", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _bounded(self, aw: Any) -> Any:
        if self.step_timeout is None:
            return await aw
        try:
            return await asyncio.wait_for(aw, self.step_timeout)
        except TimeoutError:
            raise StepTimeout(f"env call exceeded step_timeout={self.step_timeout}s") from None

    async def _blocking(self, i: int, fn_name: str, *args: Any) -> Any:
        slot = self.slots[i]
        loop = asyncio.get_running_loop()
        try:
            return await self._bounded(loop.run_in_executor(self._executor, getattr(slot, fn_name), *args))
        except StepTimeout as exc:
            self.abandoned += 1
            fresh = EnvSlot(slot.recipe, slot.base_seed, self.autoreset)
            fresh.restore(slot.meta()._replace(replayable=False, ended=False), [])
            fresh.pending = slot.pending
            self.slots[i] = fresh
            fault = InjectedFault(type(exc).__name__, str(exc))
            if fn_name == "reset":
                return await loop.run_in_executor(self._executor, fresh.reset, args[0], fault)
            return await loop.run_in_executor(self._executor, fresh.step, fault)

    # ------------------------------------------------------------------ native coroutine path
    async def _native_start(self, slot: EnvSlot) -> tuple[str, dict[str, Any]]:
        slot.episode += 1
        try:
            env, seed = slot.prepare_reset()
            obs, info = await self._bounded(env.areset(seed=seed))  # type: ignore[attr-defined]
            slot.reset_done(env)
            return obs, info
        except Exception as exc:
            return slot.reset_failed(exc)

    async def _native_step(self, slot: EnvSlot, action: Any) -> EnvStep:
        if slot.ended:
            return slot.autoreset_step(await self._native_start(slot))
        try:
            result: EnvStep = tuple(await self._bounded(slot._env().astep(action)))  # type: ignore[attr-defined]
        except Exception as exc:
            result = slot.fail_step(exc)
        if slot.finish(result[2], result[3]):
            return slot.merge_final(await self._native_start(slot), result)
        return result

    def _native(self, slot: EnvSlot) -> bool:
        try:
            env = slot._env()
        except Exception:
            return False  # a failing constructor is reported by the blocking path's containment
        cached = self._native_types.get(type(env))
        if cached is None:
            cached = self._native_types[type(env)] = is_native_async(env)
        return cached

    async def _one_step(self, i: int, action: Any) -> EnvStep:
        slot = self.slots[i]
        if self._native(slot):
            return await self._native_step(slot, action)
        result: EnvStep = await self._blocking(i, "step", action)
        return result

    async def _one_reset(self, i: int, seed: int | None) -> tuple[str, dict[str, Any]]:
        slot = self.slots[i]
        if self._native(slot):
            slot.use_seed(seed)
            return await self._native_start(slot)
        result: tuple[str, dict[str, Any]] = await self._blocking(i, "reset", seed)
        return result

    # ------------------------------------------------------------------ hooks
    async def _gather_reset(
        self, indices: list[int], seeds: list[int | None]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        pairs = await asyncio.gather(*(self._one_reset(i, s) for i, s in zip(indices, seeds)))
        return [p[0] for p in pairs], [p[1] for p in pairs]

    async def _gather_step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        steps = await asyncio.gather(*(self._one_step(i, a) for i, a in zip(indices, actions)))
        return VecStepResult.collect(indices, steps)

    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        return self._run(self._gather_reset(indices, seeds))

    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        result: VecStepResult = self._run(self._gather_step(indices, actions))
        return result

    def _close(self) -> None:
        super()._close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._loop.close()
        # Abandoned (hung) calls may still hold threads; don't wait for them.
        self._executor.shutdown(wait=self.abandoned == 0, cancel_futures=True)
