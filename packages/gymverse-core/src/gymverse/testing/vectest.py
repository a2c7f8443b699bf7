"""Envs for testing and benchmarking vector backends; importing this module registers the ``vectest:`` family.

They live in the package (not in a test folder) so worker processes and Ray actors can import them. All are small
counting games: reach a hidden target total by adding ``\\boxed{k}`` increments; their faults are deterministic
functions of the seed, so a faulty run can be compared with a sync reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from typing import Any

from gymverse.actions import ActionFormatError, parse_boxed
from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult, Wrapper
from gymverse.pool.faults import WORKER_ENV_FLAG
from gymverse.registry import RegistryError, register


class Count(Env):
    """Reach a hidden target total (5..15) by adding increments of 1..3; about 5 µs per step."""

    metadata = EnvMetadata(
        name="Count",
        family="vectest",
        domain="other",
        description="Add increments to hit a hidden total exactly.",
        action_format=r"\boxed{<1..3>}",
        max_turns=30,
    )
    complexity_params = {"max_target": (10, 40)}
    #: A few µs of pure Python that never waits: the async backend may step it inline (see `declares_nonblocking`).
    nonblocking = True

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.target = int(self.rng.integers(5, int(self.params["max_target"]) + 1))
        self.total = 0
        return f"Reach {self.target}.", {"target": self.target}

    def _step(self, action: str) -> StepResult:
        text = parse_boxed(action, what="an increment")
        if text not in ("1", "2", "3"):
            raise ActionFormatError(f"{text!r} is not 1, 2 or 3")
        self.total += int(text)
        if self.total == self.target:
            return StepResult(f"Total {self.total}: hit!", SUCCESS_REWARD, True, False, {"success": True})
        if self.total > self.target:
            return StepResult(f"Total {self.total}: overshot.", 0.0, True, False, {})
        return StepResult(f"Total {self.total}.", 0.0, False, False, {})

    def solve(self) -> str:
        return r"\boxed{" + str(min(3, self.target - self.total)) + "}"

    def sample_random_action(self) -> str:
        return r"\boxed{" + str(int(self.rng.integers(1, 4))) + "}"


class Faulty(Count):
    """`Count` that raises in ``step`` with probability `fail_rate` and in ``reset`` with `reset_fail_rate`."""

    def __init__(self, fail_rate: float = 0.1, reset_fail_rate: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_rate, self.reset_fail_rate = fail_rate, reset_fail_rate

    def _reset(self) -> tuple[str, dict[str, Any]]:
        if self.rng.random() < self.reset_fail_rate:
            raise OSError("injected reset failure")
        return super()._reset()

    def _step(self, action: str) -> StepResult:
        if self.rng.random() < self.fail_rate:
            raise ValueError(f"injected step failure at turn {self.turn}")
        return super()._step(action)


class Hang(Count):
    """`Count` whose step number `hang_at` blocks for `hang_seconds` (``astep`` hangs in asyncio instead)."""

    nonblocking = False

    def __init__(self, hang_at: int = 2, hang_seconds: float = 60.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hang_at, self.hang_seconds = hang_at, hang_seconds

    def _step(self, action: str) -> StepResult:
        if self.turn == self.hang_at:
            time.sleep(self.hang_seconds)
        return super()._step(action)


class Crash(Count):
    """`Count` that SIGKILLs its own worker process at step `crash_at` (raises instead outside a worker)."""

    def __init__(self, crash_at: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crash_at = crash_at

    def _step(self, action: str) -> StepResult:
        if self.turn == self.crash_at:
            if os.environ.get(WORKER_ENV_FLAG) != "1":
                raise RuntimeError("Crash env refuses to kill a process that is not a vector worker")
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._step(action)


class Unpicklable(Count):
    """`Count` whose step number `bad_at` puts a lock (which cannot be pickled) into its info."""

    def __init__(self, bad_at: int = 2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bad_at = bad_at

    def _step(self, action: str) -> StepResult:
        result = super()._step(action)
        if self.turn == self.bad_at:
            result.info["handle"] = threading.Lock()
        return result


class SleepIO(Count):
    """I/O-bound: every step waits `delay` seconds (``time.sleep`` when called blocking, ``asyncio.sleep`` natively)."""

    nonblocking = False

    def __init__(self, delay: float = 0.001, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay
        self._awaited = False

    def _step(self, action: str) -> StepResult:
        if not self._awaited:
            time.sleep(self.delay)
        return super()._step(action)

    async def areset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Native async reset."""
        await asyncio.sleep(0)
        return self.reset(seed=seed)

    async def astep(self, action: str) -> StepResult:
        """Native async step: the wait yields to the event loop."""
        await asyncio.sleep(self.delay)
        self._awaited = True
        try:
            return self.step(action)
        finally:
            self._awaited = False


class AsyncHang(SleepIO):
    """Native async env whose step number `hang_at` awaits for `hang_seconds`."""

    def __init__(self, hang_at: int = 2, hang_seconds: float = 60.0, **kwargs: Any) -> None:
        super().__init__(delay=0.0, **kwargs)
        self.hang_at, self.hang_seconds = hang_at, hang_seconds

    async def astep(self, action: str) -> StepResult:
        """Hangs (cancellably) at step `hang_at`."""
        if self.turn + 1 == self.hang_at:
            await asyncio.sleep(self.hang_seconds)
        return await super().astep(action)


class BusyCPU(Count):
    """CPU-bound: every step runs `iterations` rounds of pure-Python arithmetic (holding the GIL).

    A fixed amount of work, not a wall-clock spin: threads sharing the GIL must not appear to run it in parallel.
    Use `calibrate_iterations` to find the count that takes a given time on this machine.
    """

    nonblocking = False

    def __init__(self, iterations: int = 20_000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.iterations = iterations

    def _step(self, action: str) -> StepResult:
        burn(self.iterations)
        return super()._step(action)


class BadReset(Count):
    """Wins on every step; every reset but one with ``seed=ok_seed`` does `how`: ``"crash"`` (SIGKILLs its
    worker; raises outside one), ``"hang"`` (sleeps `hang_seconds`) or ``"raise"``."""

    nonblocking = False

    def __init__(self, how: str = "crash", hang_seconds: float = 60.0, ok_seed: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.how, self.hang_seconds, self.ok_seed = how, hang_seconds, ok_seed

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Fail unless `seed` is the one good seed."""
        if seed != self.ok_seed:
            if self.how == "hang":
                time.sleep(self.hang_seconds)
            elif self.how == "crash" and os.environ.get(WORKER_ENV_FLAG) == "1":
                os.kill(os.getpid(), signal.SIGKILL)
            else:
                raise RuntimeError("injected reset failure")
        return super().reset(seed)

    def _step(self, action: str) -> StepResult:
        return StepResult("You win.", SUCCESS_REWARD, True, False, {"success": True})


class _Explodes:
    """Pickles fine; unpickling it outside a vector worker fails."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_explode, ())


def _explode() -> None:
    if os.environ.get(WORKER_ENV_FLAG) != "1":
        raise RuntimeError("this object cannot be rebuilt in the parent")


class BadStep(Count):
    """`Count` whose step number `bad_at` returns something malformed, per `how`: ``"arity"`` (a 4-tuple),
    ``"none"``, ``"string-reward"``, ``"nan"`` (a NaN reward) or ``"parent-unpickle"`` (an info value that only
    unpickles inside a worker)."""

    nonblocking = False

    def __init__(self, how: str = "none", bad_at: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.how, self.bad_at = how, bad_at

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if self.turn != self.bad_at:
            return result
        bad: Any = {
            "arity": tuple(result)[:4],
            "none": None,
            "string-reward": (*result[:1], "1.0", *result[2:]),
            "nan": result._replace(reward=float("nan")),
            "parent-unpickle": result._replace(info={"payload": _Explodes()}),
        }[self.how]
        return bad


def burn(iterations: int) -> int:
    """Pure-Python busy work."""
    acc = 0
    for i in range(iterations):
        acc = (acc + i * i) % 1_000_003
    return acc


def calibrate_iterations(seconds: float = 0.001, rounds: int = 5) -> int:
    """Iterations of `burn` that take `seconds` here (best of `rounds`, so background load inflates it least)."""
    probe = 50_000
    best = min(_timed(probe) for _ in range(rounds))
    return max(1, int(probe * seconds / best))


def _timed(iterations: int) -> float:
    t0 = time.perf_counter()
    burn(iterations)
    return time.perf_counter() - t0


class Tag(Wrapper):
    """Appends `` [tagged]`` to every observation (to check wrappers reach every backend)."""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Forward and tag."""
        obs, info = self.env.reset(seed=seed)
        return obs + " [tagged]", info

    def step(self, action: str) -> StepResult:
        """Forward and tag."""
        res = self.env.step(action)
        return res._replace(observation=res.observation + " [tagged]")


_ENVS = {
    "Count": Count,
    "Faulty": Faulty,
    "Hang": Hang,
    "Crash": Crash,
    "SleepIO": SleepIO,
    "AsyncHang": AsyncHang,
    "BusyCPU": BusyCPU,
    "Unpicklable": Unpicklable,
    "BadReset": BadReset,
    "BadStep": BadStep,
}
for _name in _ENVS:
    with contextlib.suppress(RegistryError):  # already registered by an earlier import of this module
        register(f"vectest:{_name}", f"{__name__}:{_name}")
