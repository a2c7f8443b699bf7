"""One env in a vector env: building it, seeding episodes, autoreset and fault containment.

`EnvSlot` is the single implementation of per-env semantics; every backend runs it where the env lives (the
caller's thread, an executor thread, a worker process or a Ray actor), so all backends produce the same
transcript for the same seeds.

Seeding follows Gymnasium: an explicit ``reset(seed=s)`` reseeds the env; later episodes (autoreset, or reset
without a seed) continue the env's own RNG, so a plain loop and every backend produce the same transcript
(reseeding per episode would also cost ~50 µs, ten steps of a cheap env). A freshly built env (the first one, or
one rebuilt after a failure) is seeded with `episode_seed(base_seed, episode)`, keeping runs with faults
deterministic. Process/Ray workers also record each episode's start (its seed, or the RNG state when it
continues), which is what lets a lost env be rebuilt exactly by replaying its episode.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import math
import numbers
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from gymverse.core import StepResult
from gymverse.imports import import_object
from gymverse.pool.faults import InjectedFault, StepTimeout, error_info, error_observation
from gymverse.protocol import EnvLike, is_env_like
from gymverse.registry import RegistryError, spec

AutoresetMode = Literal["next_step", "same_step", "disabled"]
AUTORESET_MODES: tuple[str, ...] = ("same_step", "next_step", "disabled")
EnvStep = tuple[str, float, bool, bool, dict[str, Any]]
WrapperFn = Callable[[EnvLike], EnvLike]

_SEED_MASK = (1 << 63) - 1


def episode_seed(base_seed: int, episode: int) -> int:
    """Seed for a freshly built env at `episode` (``episode <= 0`` gives `base_seed` itself)."""
    if episode <= 0:
        return base_seed
    # splitmix64 finalizer: cheap, and distinct (base, episode) pairs give unrelated seeds
    z = (base_seed * 0x9E3779B97F4A7C15 + episode) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & _SEED_MASK


def base_seeds(seed: int | None, n: int) -> list[int]:
    """Per-env base seeds: ``seed + i``, or fresh entropy when `seed` is None."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy) % (1 << 62)  # type: ignore[arg-type]
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    return [int(seed) + i for i in range(n)]


def check_step_timeout(step_timeout: float | None) -> float | None:
    """Validate a per-call timeout: None (no limit) or positive seconds."""
    if step_timeout is not None and step_timeout <= 0:
        raise ValueError(f"step_timeout must be positive seconds, got {step_timeout}")
    return step_timeout


#: Entry-point group of the modules that host envs elsewhere (gymverse-sandbox's env host): see
#: `load_env_host_modules`.
ENV_HOST_GROUP = "gymverse.env_hosts"


@functools.cache
def load_env_host_modules() -> tuple[str, ...]:
    """Import the env-hosting modules installed packages register (group ``gymverse.env_hosts``); their names.

    Every env built for training runs next to them, so an env cannot tell evaluation (hosted in a sandbox) from
    training by looking for them in ``sys.modules`` (see `gymverse.pool.spotcheck`). Core names no host itself.
    """
    eps = sorted(importlib.metadata.entry_points(group=ENV_HOST_GROUP), key=lambda ep: ep.name)
    for ep in eps:
        ep.load()
    return tuple(ep.value for ep in eps)


@dataclass(frozen=True)
class EnvRecipe:
    """A picklable description of how to build one env (resolved in the parent, so workers need no registry)."""

    env_id: str
    entry_point: str | Callable[..., EnvLike]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrappers: tuple[WrapperFn, ...] = ()

    @classmethod
    def resolve(
        cls, env: str | Callable[[], EnvLike], kwargs: Mapping[str, Any], wrappers: Sequence[WrapperFn] = ()
    ) -> EnvRecipe:
        """Look `env` up in the registry (an id) or accept it as a zero-argument factory."""
        if callable(env):
            if kwargs:
                raise ValueError("env kwargs can only be combined with registered env ids, not with a factory")
            return cls(getattr(env, "__name__", repr(env)), env, {}, tuple(wrappers))
        if not isinstance(env, str):
            raise TypeError(f"expected an env id like 'game:GuessTheNumber' or a factory, got {type(env).__name__}")
        s = spec(env)
        return cls(env, s.entry_point, {**s.defaults, **kwargs}, tuple(wrappers))

    def build(self) -> EnvLike:
        """Construct the env and apply the wrappers, innermost first."""
        load_env_host_modules()

        factory = self.entry_point
        if isinstance(factory, str):
            try:
                factory = import_object(factory)
            except ImportError as err:
                raise RegistryError(f"{self.env_id}: cannot load entry point {self.entry_point!r}: {err}") from err
        env = factory(**self.kwargs)
        if not is_env_like(env):
            raise RegistryError(
                f"{self.env_id}: factory returned {type(env).__name__}, not a gymverse Env (or EnvLike)"
            )
        env.spec_id = self.env_id  # type: ignore[attr-defined]
        for wrap in self.wrappers:
            env = wrap(env)
        return env


def _rng(env: EnvLike) -> np.random.Generator:
    """The base env's own generator, whose state replays an unseeded start (an `Env` has one; a proxy may not)."""
    rng = getattr(env.unwrapped, "rng", None)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{type(env.unwrapped).__name__} has no rng generator: seed its episodes to record or replay them"
        )
    return rng


class SlotMeta(NamedTuple):
    """What a supervisor needs to rebuild a slot elsewhere by replay."""

    base_seed: int
    episode: int
    level: int | None
    pending: int | None
    replayable: bool
    ended: bool
    #: (seed, None) or (None, RNG state) the current episode started from; None when unchanged since last report.
    start: tuple[int | None, Any] | None = None


def _on_alarm(signum: int, frame: object) -> None:
    raise StepTimeout("env call exceeded step_timeout")


class EnvSlot:
    """Owns one env: seeds its episodes, applies complexity, autoresets, and turns env exceptions into results."""

    def __init__(
        self, recipe: EnvRecipe, base_seed: int, autoreset: AutoresetMode, alarm_timeout: float | None = None
    ) -> None:
        self.recipe = recipe
        self.autoreset = autoreset
        self.base_seed = base_seed
        self.episode = -1  # no episode yet; the first reset starts episode 0
        self.level: int | None = None  # None: the env's own constructor level
        self.pending: int | None = None
        self.env: EnvLike | None = None
        self.ended = True
        self.replayable = False
        self.explicit_seed: int | None = None
        self.unseeded = True  # the env (built lazily) has not been reset with a seed since it was built
        self.track = False  # record episode starts for replay (process / Ray workers)
        self.start: tuple[int | None, Any] = (None, None)
        self._start_reported = True
        # Only the sync backend, on the main thread, can interrupt a hung call (SIGALRM).
        self.alarm_timeout = alarm_timeout

    # ------------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        if self.alarm_timeout is None:
            yield
            return
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, self.alarm_timeout)
        started = time.monotonic()
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer_delay > 0:  # someone else's alarm (e.g. pytest-timeout) was armed: give it back its time
                remaining = outer_delay - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-3), outer_interval)

    def _env(self) -> EnvLike:
        if self.env is None:
            self.env = self.recipe.build()
        return self.env

    def discard(self) -> None:
        """Drop the env (after a failure); a fresh one is built at the next reset."""
        env, self.env = self.env, None
        self.replayable = False
        self.unseeded = True
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()

    def meta(self) -> SlotMeta:
        """Replay record of the current state (the episode start only the first time it is reported)."""
        start = None if self._start_reported else self.start
        self._start_reported = True
        return SlotMeta(self.base_seed, self.episode, self.level, self.pending, self.replayable, self.ended, start)

    def set_complexity(self, level: int) -> None:
        """Apply `level` from the next reset on."""
        self.pending = level

    def _apply_level(self, env: EnvLike) -> None:
        if self.pending is not None:
            self.level, self.pending = self.pending, None
        if self.level is not None:
            env.set_complexity(self.level)

    # ------------------------------------------------------------------ episodes
    def start_episode(self, fault: InjectedFault | None = None) -> tuple[str, dict[str, Any]]:
        """Reset into the next episode; a failing reset is reported (and the env dropped), never retried silently."""
        self.episode += 1
        try:
            if fault is not None:
                raise _Injected(fault)
            env, seed = self.prepare_reset()
            with self._guard():
                obs, info = env.reset(seed=seed)
            self.reset_done(env)
            return obs, info
        except Exception as exc:
            return self.reset_failed(exc)

    def prepare_reset(self) -> tuple[EnvLike, int | None]:
        """Build the env if needed and apply the pending level; returns it and the seed to reset with."""
        env = self._env()
        self._apply_level(env)
        seed: int | None
        if self.explicit_seed is not None:
            seed, self.explicit_seed = self.explicit_seed, None
        else:
            seed = episode_seed(self.base_seed, self.episode) if self.unseeded else None
        self.unseeded = False
        if self.track:
            self.start = (seed, None if seed is not None else _rng(env).bit_generator.state)
            self._start_reported = False
        return env, seed

    def reset_done(self, env: EnvLike) -> None:
        """Book-keep a successful reset."""
        self.level = env.complexity
        self.ended = False
        self.replayable = True

    def reset_failed(self, exc: BaseException) -> tuple[str, dict[str, Any]]:
        """Result of a failed reset: the env is dropped and stays finished, so the next step resets a fresh one."""
        err = error_info(exc.fault if isinstance(exc, _Injected) else exc, during="reset")
        self.discard()
        self.ended = True
        return error_observation(err), {**err, "reset_failed": True}

    def reset(self, base_seed: int | None, fault: InjectedFault | None = None) -> tuple[str, dict[str, Any]]:
        """Explicit reset: a seed reseeds the env (and restarts the episode count); None continues its RNG."""
        self.use_seed(base_seed)
        return self.start_episode(fault)

    def use_seed(self, base_seed: int | None) -> None:
        """Make the next reset use `base_seed` (None: continue the env's RNG)."""
        if base_seed is not None:
            self.base_seed = self.explicit_seed = int(base_seed)
            self.episode = -1

    def step(self, action: Any, autoreset: bool = True) -> EnvStep:
        """Step the env (autoresetting first if its episode has ended); never raises for env failures.

        ``autoreset=False`` leaves a ``"same_step"`` reset to the caller (`needs_reset`), so a backend can bound
        it separately and keep the final step's result whatever the reset does.
        """
        if self.ended:
            # an injected fault for an ended env fails its reset without running env code (no crash loops)
            return self.autoreset_step(self.start_episode(action if isinstance(action, InjectedFault) else None))
        env = self.env
        try:
            if isinstance(action, InjectedFault):
                raise _Injected(action)
            if env is None:
                env = self._env()
            result: EnvStep
            if self.alarm_timeout is None:  # the common path stays free of context-manager overhead
                result = env.step(action)
            else:
                with self._guard():
                    result = env.step(action)
            reward = result[1] if type(result) is StepResult else None
            if not isinstance(reward, float) or reward != reward or reward in _INFINITIES:  # NaN != NaN
                result = checked_step(result)
        except Exception as exc:
            return self.fail_now(exc, autoreset)
        if result[2] or result[3]:  # `finish`, inlined: this runs for every step of every env
            self.ended = True
            if autoreset and self.autoreset == "same_step":
                return self.merge_final(self.start_episode(), result)
        return result

    @staticmethod
    def owes_reset(result: EnvStep) -> bool:
        """Whether a step result taken with ``autoreset=False`` ended its episode and was not itself a reset."""
        return bool(result[2] or result[3]) and not result[4].get("autoreset")

    def needs_reset(self, result: EnvStep) -> bool:
        """Whether a step taken with ``autoreset=False`` still owes its ``"same_step"`` reset."""
        return self.autoreset == "same_step" and self.ended and not result[4].get("autoreset")

    def fail_now(self, exc: BaseException | InjectedFault, autoreset: bool = True) -> EnvStep:
        """End the current episode because of `exc` (autoresetting as configured) and return the step result."""
        result = self.fail_step(exc)
        if self.finish(result[2], result[3]) and autoreset:
            return self.merge_final(self.start_episode(), result)
        return result

    # Pieces of `step`, shared with the async backend's native-coroutine path.
    def autoreset_step(self, reset: tuple[str, dict[str, Any]]) -> EnvStep:
        """The result of a step that only reset a finished env (``"next_step"`` mode)."""
        if self.autoreset == "disabled":
            raise RuntimeError("slot stepped after its episode ended with autoreset disabled")
        obs, info = reset
        info["autoreset"] = True
        # a failed reset is a one-step episode that ends truncated with the error, like any other failure
        return obs, 0.0, False, bool(info.get("reset_failed")), info

    def fail_step(self, exc: BaseException | InjectedFault) -> EnvStep:
        """End the episode because the env failed, and drop the env."""
        info = error_info(exc.fault if isinstance(exc, _Injected) else exc, during="step")
        self.discard()
        return error_observation(info), 0.0, False, True, info

    def finish(self, terminated: bool, truncated: bool) -> bool:
        """Book-keep an episode end; True when the env must be reset now (``"same_step"``)."""
        if not (terminated or truncated):
            return False
        self.ended = True
        return self.autoreset == "same_step"

    @staticmethod
    def merge_final(reset: tuple[str, dict[str, Any]], final: EnvStep) -> EnvStep:
        """``"same_step"`` result: the new episode's first observation, the old one's last in the info."""
        obs, info = reset
        info["final_observation"] = final[0]
        info["final_info"] = final[4]
        return obs, final[1], final[2], final[3], info

    def restore(self, meta: SlotMeta, actions: Sequence[Any]) -> None:
        """Rebuild this slot's state elsewhere: restart the episode from its recorded start and replay `actions`."""
        self.discard()
        self.base_seed, self.episode, self.level, self.pending = meta.base_seed, meta.episode, meta.level, None
        self.ended = meta.ended
        if meta.replayable:
            if meta.start is None:
                raise ValueError("cannot replay an episode whose start was not recorded")
            self.start = meta.start
            env = self._env()
            self._apply_level(env)
            seed, rng_state = meta.start
            if seed is None:
                _rng(env).bit_generator.state = rng_state
            env.reset(seed=seed)
            for action in actions:
                env.step(action)
            self.replayable = True
            self.unseeded = False
        self.pending = meta.pending

    def close(self) -> None:
        """Close the env."""
        self.discard()


_INFINITIES = (float("inf"), float("-inf"))


def checked_step(result: Any) -> EnvStep:
    """`result` as a valid step 5-tuple, or `TypeError`/`ValueError` naming what the env got wrong.

    A non-finite reward is an env failure too: passing NaN on would poison every return it is summed into.
    """
    if not isinstance(result, tuple) or len(result) != 5:
        what = f"a {len(result)}-tuple" if isinstance(result, tuple) else type(result).__name__
        raise TypeError(f"env.step must return (observation, reward, terminated, truncated, info), got {what}")
    obs, reward, terminated, truncated, info = result
    if not isinstance(reward, numbers.Real):
        raise TypeError(f"env.step returned a reward of type {type(reward).__name__}, expected a number")
    reward = float(reward)
    if not math.isfinite(reward):
        raise ValueError(f"env.step returned a non-finite reward ({reward})")
    if not isinstance(info, dict):
        raise TypeError(f"env.step returned info of type {type(info).__name__}, expected a dict")
    return StepResult(obs, reward, bool(terminated), bool(truncated), info)


class _Injected(Exception):
    def __init__(self, fault: InjectedFault) -> None:
        super().__init__(fault.message)
        self.fault = fault
