"""`AsyncVecEnv`: asyncio execution. Native ``async def astep/areset`` envs are awaited on the loop; blocking
envs run in a bounded thread pool, except those whose class declares ``nonblocking = True`` (a few µs of pure
Python), which are stepped inline because a thread hop would cost more than their step. Use
``await venv.astep(...)`` inside a running loop, or the plain ``step`` anywhere: it drives a private loop in the
calling thread, or on a private loop thread when the caller is itself inside a running event loop.

``step_timeout`` cancels a native coroutine; a blocking call cannot be interrupted, so its slot is abandoned to the
thread (whose late result is discarded) and a fresh env takes its place (see `BlockingRunner` for why that never
starves or blames the other envs). A ``"same_step"`` reset runs as its own bounded call after the step, so a
reset that hangs keeps the final step's result and is blamed on its own env.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from gymverse.pool.blocking import BlockingRunner, declares_nonblocking, is_native_async
from gymverse.pool.faults import InjectedFault, StepTimeout
from gymverse.pool.slot import EnvRecipe, EnvSlot, EnvStep
from gymverse.pycompat import timeout as timeout_after
from gymverse.vector.base import Actions, InProcessVecEnv, VecOptions, VecStepResult, collect_resets

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Unpack

T = TypeVar("T")


_NATIVE, _INLINE, _THREAD = 0, 1, 2


class AsyncVecEnv(InProcessVecEnv):
    """Envs driven concurrently by asyncio; `max_workers` bounds the threads used for blocking envs."""

    backend = "async"

    def __init__(
        self, recipes: Sequence[EnvRecipe], *, max_workers: int | None = None, **options: Unpack[VecOptions]
    ) -> None:
        super().__init__(recipes, **options)
        workers = max_workers if max_workers is not None else min(self.num_envs, 128)
        if workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {workers}")
        self.slots = [EnvSlot(r, s, self.autoreset) for r, s in zip(self.recipes, self.seeds)]
        self._runner = BlockingRunner(workers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kinds: dict[type, int] = {}

    @property
    def _executor(self) -> ThreadPoolExecutor:
        return self._runner.executor

    @property
    def abandoned(self) -> int:
        """Blocking calls left running after a timeout."""
        return self._runner.abandoned

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
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # No loop in this thread: drive a private loop right here, sparing two thread hand-offs per call.
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            if self._thread is None:
                return self._loop.run_until_complete(coro)
        # Called from inside a running loop (or the private loop already moved to its thread): use a loop thread.
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop.run_forever, name="gymverse-async-vec", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _bounded(self, aw: Any) -> Any:
        if self.step_timeout is None:
            return await aw
        try:
            # asyncio.timeout cancels this task in place; wait_for would wrap `aw` in yet another Task.
            async with timeout_after(self.step_timeout):
                return await aw
        except TimeoutError:
            raise StepTimeout(f"env call exceeded step_timeout={self.step_timeout}s") from None

    async def _blocking(self, i: int, fn_name: str, *args: Any) -> Any:
        slot = self.slots[i]
        try:
            return await self._runner.call(self.step_timeout, getattr(slot, fn_name), *args)
        except StepTimeout as exc:
            fresh = EnvSlot(slot.recipe, slot.base_seed, self.autoreset)
            fresh.restore(slot.meta()._replace(replayable=False, ended=False), [])
            fresh.pending = slot.pending
            self.slots[i] = fresh
            fault = InjectedFault(type(exc).__name__, str(exc))
            # With a fault no env code runs, so these return at once, right here.
            if fn_name == "reset":
                return fresh.reset(args[0], fault)
            if fn_name == "start_episode":
                return fresh.start_episode(fault)
            return fresh.step(fault, False)

    async def _blocking_step(self, i: int, action: Any) -> EnvStep:
        result: EnvStep = await self._blocking(i, "step", action, False)
        slot = self.slots[i]  # a fresh one if the step timed out
        if slot.needs_reset(result):
            result = slot.merge_final(await self._blocking(i, "start_episode"), result)
        return result

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
            env = slot.env if slot.env is not None else slot._env()
            if self.step_timeout is None:  # the common path: no extra coroutine frame
                result: EnvStep = tuple(await env.astep(action))  # type: ignore[attr-defined]
            else:
                result = tuple(await self._bounded(env.astep(action)))  # type: ignore[attr-defined]
        except Exception as exc:
            result = slot.fail_step(exc)
        if slot.finish(result[2], result[3]):
            return slot.merge_final(await self._native_start(slot), result)
        return result

    def _kind(self, slot: EnvSlot) -> int:
        env = slot.env
        if env is None:
            try:
                env = slot._env()
            except Exception:
                return _THREAD  # a failing constructor is reported by the blocking path's containment
        kind = self._kinds.get(type(env))
        if kind is None:
            kind = self._kinds[type(env)] = (
                _NATIVE if is_native_async(env) else _INLINE if declares_nonblocking(env) else _THREAD
            )
        return kind

    async def _one_reset(self, i: int, seed: int | None) -> tuple[str, dict[str, Any]]:
        slot = self.slots[i]
        kind = self._kind(slot)
        if kind == _NATIVE:
            slot.use_seed(seed)
            return await self._native_start(slot)
        if kind == _INLINE and self.step_timeout is None:
            return slot.reset(seed)
        result: tuple[str, dict[str, Any]] = await self._blocking(i, "reset", seed)
        return result

    # ------------------------------------------------------------------ hooks
    async def _gather_reset(
        self, indices: list[int], seeds: list[int | None]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        return collect_resets(await asyncio.gather(*(self._one_reset(i, s) for i, s in zip(indices, seeds))))

    async def _gather_step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        steps: list[Any] = [None] * len(indices)
        slots = self.slots
        # Envs declaring `nonblocking = True` are stepped right here on the loop thread (a thread hop costs more
        # than their step); without a step_timeout nothing needs to interrupt them.
        inline = self.step_timeout is None
        positions: list[int] = []
        coros: list[Coroutine[Any, Any, EnvStep]] = []
        later: list[int] = []
        for k, i in enumerate(indices):
            kind = self._kind(slots[i])
            if kind == _NATIVE:
                positions.append(k)
                coros.append(self._native_step(slots[i], actions[k]))
            elif kind == _INLINE and inline:
                later.append(k)
            else:
                positions.append(k)
                coros.append(self._blocking_step(i, actions[k]))
        if not later:
            for k, step in zip(positions, await asyncio.gather(*coros)):
                steps[k] = step
            return VecStepResult.collect(indices, steps)
        pending = asyncio.gather(*coros)
        if coros:
            await asyncio.sleep(0)  # let the others start waiting before the inline envs take the thread
        try:
            for k in later:
                steps[k] = slots[indices[k]].step(actions[k])
        except BaseException:
            pending.cancel()
            raise
        for k, step in zip(positions, await pending):
            steps[k] = step
        return VecStepResult.collect(indices, steps)

    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        return self._run(self._gather_reset(indices, seeds))

    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        slots = self.slots
        if self.step_timeout is None and all(self._kind(slots[i]) == _INLINE for i in indices):
            # nothing to await: skip the event loop's per-call cost, exactly as the sync backend steps them
            return VecStepResult.collect(indices, [slots[i].step(a) for i, a in zip(indices, actions)])
        result: VecStepResult = self._run(self._gather_step(indices, actions))
        return result

    def _close(self) -> None:
        super()._close()
        if self._loop is not None:
            if self._thread is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=5)
            if not self._loop.is_running():
                self._loop.close()
        # Abandoned (hung) calls may still hold threads; don't wait for them.
        self._runner.shutdown()
