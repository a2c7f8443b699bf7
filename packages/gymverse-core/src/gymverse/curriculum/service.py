"""One way to share a `CurriculumState` between rollout workers and the trainer.

* `LocalCurriculum(state)`: in-process (a single-process trainer, tests, evaluation).
* `RayCurriculum`: a **detached** named Ray actor (``pip install 'gymverse-core[ray]'``). Its lifetime does not
  depend on any Python handle: the launcher may drop its handle, the driver that created it may exit, and every
  process of the cluster finds it by name (`connect_ray_curriculum`). A detached actor also outlives the job, so
  `start_ray_curriculum` replaces a leftover actor of the same name unless ``reuse=True``, and `stop` kills it.

Both expose the same methods, sync for the trainer and ``a``-prefixed async ones for rollout coroutines, plus
`save`/`load` of a JSON checkpoint file (written atomically).
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from gymverse.curriculum.state import CurriculumState, EpisodeConfig, EpisodeOutcome, StepReport
from gymverse.trajectory import Trajectory

DEFAULT_NAMESPACE = "gymverse"
#: The curriculum file saved in each checkpoint folder (one per checkpoint tag).
CHECKPOINT_FILE = "gymverse_curriculum.json"


def run_scoped_name(base: str) -> str:
    """`base` plus this Ray job's id: every process of one run gets the same name, two runs on a cluster differ.

    verl's and OpenRLHF's workers are actors created by the run's driver, so they share its job id; a second
    run on the same cluster is a new job, so it can no longer replace (kill) the first run's curriculum actor.
    """
    import ray

    return f"{base}-{ray.get_runtime_context().get_job_id()}"


def save_checkpoint(service: CurriculumService, folder: str, **meta: Any) -> str:
    """Write the curriculum into one checkpoint's folder (call it before the framework writes its "latest"
    marker, so a crash in between leaves a checkpoint that is never resumed rather than one without levels)."""
    return service.save(os.path.join(folder, CHECKPOINT_FILE), **meta)


def load_checkpoint(service: CurriculumService, folder: str) -> None:
    """Restore the curriculum saved in checkpoint `folder`; a folder without one is an error, never a reset."""
    path = os.path.join(folder, CHECKPOINT_FILE)
    if not service.load(path):
        raise FileNotFoundError(
            f"checkpoint {folder} has no {CHECKPOINT_FILE}: resuming it would restart every env at the initial "
            "level; resume a checkpoint written with the curriculum on, or start a fresh run"
        )


def _outcomes(episodes: Iterable[Trajectory | EpisodeOutcome]) -> list[EpisodeOutcome]:
    return [e if isinstance(e, EpisodeOutcome) else EpisodeOutcome.of(e) for e in episodes]


class CurriculumService(ABC):
    """The curriculum API every adapter uses, wherever the state lives."""

    @abstractmethod
    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any: ...

    @abstractmethod
    async def _acall(self, method: str, *args: Any, **kwargs: Any) -> Any: ...

    def episode_config(self, env_id: str, *, validation: bool = False) -> EpisodeConfig:
        """Level and turn cap for the next episode of `env_id`."""
        return EpisodeConfig(**self._call("episode_config", env_id, validation=validation))

    async def aepisode_config(self, env_id: str, *, validation: bool = False) -> EpisodeConfig:
        """`episode_config` for rollout coroutines."""
        return EpisodeConfig(**await self._acall("episode_config", env_id, validation=validation))

    def record(self, episodes: Iterable[Trajectory | EpisodeOutcome]) -> int:
        """Count finished training episodes (each once); returns how many were new."""
        return int(self._call("record", _outcomes(episodes)))

    async def arecord(self, episodes: Iterable[Trajectory | EpisodeOutcome]) -> int:
        """`record` for rollout coroutines."""
        return int(await self._acall("record", _outcomes(episodes)))

    def end_step(self) -> StepReport:
        """Close one training step (see `CurriculumState.end_step`)."""
        return StepReport(**self._call("end_step"))

    def levels(self) -> dict[str, int]:
        """Current level of every env seen so far."""
        return dict(self._call("levels"))

    def state_dict(self) -> dict[str, Any]:
        """The curriculum's JSON state."""
        return dict(self._call("state_dict"))

    def load_state_dict(self, state: Mapping[str, Any], *, load_config: bool = False) -> None:
        """Restore progress (the running config is kept unless `load_config`)."""
        self._call("load_state_dict", dict(state), load_config=load_config)

    def save(self, path: str, **meta: Any) -> str:
        """Write the state (plus JSON `meta`, e.g. ``global_step``) to `path` atomically; returns the path."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({**self.state_dict(), **meta}, fh)
        os.replace(tmp, path)  # never leave a half-written checkpoint behind
        return path

    def load(self, path: str, *, load_config: bool = False) -> bool:
        """Restore from a `save` file; False when there is none."""
        if not os.path.exists(path):
            return False
        with open(path, encoding="utf-8") as fh:
            self.load_state_dict(json.load(fh), load_config=load_config)
        return True


def _serve(state: CurriculumState, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call `method` on `state`, with results as plain data (they may cross a process boundary)."""
    if method == "episode_config":
        return asdict(state.episode_config(*args, **kwargs))
    if method == "end_step":
        return asdict(state.end_step())
    return getattr(state, method)(*args, **kwargs)


class _CurriculumActor:
    """The Ray actor's body: one `CurriculumState` built from JSON config."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.state = CurriculumState.from_config(config)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _serve(self.state, method, *args, **kwargs)


class LocalCurriculum(CurriculumService):
    """A curriculum living in this process."""

    def __init__(self, state: CurriculumState | None = None) -> None:
        self.state = state if state is not None else CurriculumState()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _serve(self.state, method, *args, **kwargs)

    async def _acall(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._call(method, *args, **kwargs)


class RayCurriculum(CurriculumService):
    """A curriculum in a detached named Ray actor (see the module docstring)."""

    def __init__(self, handle: Any, name: str, namespace: str) -> None:
        self.handle = handle
        self.name = name
        self.namespace = namespace

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        import ray

        return ray.get(self.handle.call.remote(method, *args, **kwargs))

    async def _acall(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.handle.call.remote(method, *args, **kwargs)

    def stop(self) -> None:
        """Kill the actor (it is detached: nothing else ends it) and wait until its name is free again."""
        _kill(self.handle, self.name, self.namespace)


def _kill(handle: Any, name: str, namespace: str, timeout: float = 30.0) -> None:
    import ray

    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + timeout
    while _lookup(name, namespace) is not None:  # the name is released asynchronously
        if time.monotonic() > deadline:
            raise TimeoutError(f"curriculum actor {name!r} still registered {timeout}s after ray.kill")
        time.sleep(0.05)


def _lookup(name: str, namespace: str) -> Any | None:
    import ray

    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def start_ray_curriculum(
    config: Mapping[str, Any] | None = None,
    *,
    name: str,
    namespace: str = DEFAULT_NAMESPACE,
    reuse: bool = False,
) -> RayCurriculum:
    """Start the detached curriculum actor `name` (Ray must be initialized).

    With ``reuse=True`` an existing actor of that name is returned as is (workers racing to create it get one);
    otherwise a leftover from an earlier run is killed and replaced by a fresh one built from `config`.
    """
    import ray

    CurriculumState.from_config(config or {})  # a bad config fails here, in the caller, not inside the actor
    if not reuse:
        old = _lookup(name, namespace)
        if old is not None:
            _kill(old, name, namespace)
    actor_cls = ray.remote(_CurriculumActor)
    for attempt in range(50):
        try:
            handle = actor_cls.options(
                name=name, namespace=namespace, lifetime="detached", get_if_exists=reuse, num_cpus=0, max_concurrency=1
            ).remote(dict(config or {}))
            service = RayCurriculum(handle, name, namespace)
            service.levels()  # wait until it runs, so a broken actor fails here
            return service
        except (ValueError, ray.exceptions.RayActorError):  # raced with an actor of that name being killed
            if attempt == 49:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def connect_ray_curriculum(name: str, *, namespace: str = DEFAULT_NAMESPACE) -> RayCurriculum:
    """The running curriculum actor `name`; a clear error when nobody started it."""
    handle = _lookup(name, namespace)
    if handle is None:
        raise RuntimeError(
            f"no GymVerse curriculum actor {name!r} in Ray namespace {namespace!r}: start it once with "
            "gymverse.curriculum.start_ray_curriculum(config, name=...) (the adapters' launchers do)"
        )
    return RayCurriculum(handle, name, namespace)
