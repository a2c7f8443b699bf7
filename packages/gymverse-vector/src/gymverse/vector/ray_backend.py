"""`RayVecEnv`: envs hosted by Ray actors (several per actor), for when one machine is outgrown.

Ray is imported lazily (install ``gymverse-vector[ray]``); a cluster already initialized by the caller is used as is,
otherwise a local one is started. Each env call is its own actor method call: an actor runs them in submission
actor has at most one call in flight, so when it dies or stops answering, that call names the env at fault. The
faulty env's episode ends truncated with ``info["error"]``; the actor is killed and replaced, and its other envs
are rebuilt by replay from the parent's ledger. Actors work in parallel; each serves its envs one call at a time.

Faults are booked as on the process backend (`OutOfProcessVecEnv`): an env whose resets kill or hang its actor
`MAX_RESET_FAILURES` times in a row is quarantined. A result that the actor serialized but the parent cannot
deserialize makes Ray raise `RaySystemError` for that one call; since each call carries one env's result, only
that env's episode ends (truncated, ``info["error"]``) and its env is dropped in the actor, as a process worker's
undecodable result is handled env by env.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gymverse.pool.faults import WORKER_ENV_FLAG, InjectedFault, StepTimeout, WorkerCrashed
from gymverse.pool.slot import AutoresetMode, EnvRecipe, EnvSlot, EnvStep, SlotMeta
from gymverse.vector.base import VecOptions, VecStepResult, collect_resets
from gymverse.vector.out_of_process import OutOfProcessVecEnv, Undecodable
from gymverse.vector.worker import ResetItem, RestoreItem, WorkerCore

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Unpack


class RayEnvHost:
    """The actor class: a `WorkerCore` answering one env call at a time."""

    def __init__(self, recipes: dict[int, EnvRecipe], seeds: dict[int, int], autoreset: AutoresetMode) -> None:
        os.environ[WORKER_ENV_FLAG] = "1"
        self.core = WorkerCore(recipes, seeds, autoreset)

    def ping(self) -> int:
        """The actor's process id (also a readiness check)."""
        return os.getpid()

    def reset_one(self, item: ResetItem) -> tuple[str, dict[str, Any], SlotMeta]:
        """Reset one env."""
        return self.core.reset([item])[0]

    def step_one(self, index: int, action: Any) -> Any:
        """Step one env."""
        return self.core.step([(index, action)])[0]

    def autoreset_one(self, index: int, fault: Any) -> tuple[str, dict[str, Any], SlotMeta]:
        """Start the next episode of one env (the ``"same_step"`` reset, a call of its own)."""
        return self.core.autoreset([(index, fault)])[0]

    def set_complexity(self, items: Sequence[tuple[int, int]]) -> list[None]:
        """Record pending levels."""
        return self.core.set_complexity(items)

    def discard(self, items: Sequence[int]) -> list[None]:
        """Drop envs whose last result never reached the parent."""
        return self.core.discard(items)

    def restore(self, items: Sequence[RestoreItem]) -> list[str | None]:
        """Rebuild envs by replay."""
        return self.core.restore(items)

    def close(self) -> None:
        """Close every env."""
        self.core.close()


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError("the ray backend needs Ray: pip install 'gymverse-vector[ray]'") from err
    return ray


class RayVecEnv(OutOfProcessVecEnv):
    """Envs in `num_workers` Ray actors (default: the cluster's CPU count, at most one per env)."""

    backend = "ray"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        num_workers: int | None = None,
        actor_options: dict[str, Any] | None = None,
        **options: Unpack[VecOptions],
    ) -> None:
        super().__init__(recipes, **options)
        ray = _ray()
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self._plan_hosts(num_workers or min(self.num_envs, max(1, int(ray.cluster_resources().get("CPU", 1)))))
        # num_cpus=0: hosts mostly wait on envs; Ray would otherwise cap the actor count at the CPU count.
        remote_options = {"num_cpus": 0, "max_restarts": 0, "max_task_retries": 0, **(actor_options or {})}
        self._actor_cls = ray.remote(**remote_options)(RayEnvHost)
        self.hosts: list[Any] = []
        try:
            for block in self.blocks:  # one by one, so a failed start still closes the actors already started
                self.hosts.append(self._start(block))
            ray.get([h.ping.remote() for h in self.hosts])
        except BaseException:
            self._close()
            raise

    def _start(self, block: list[int]) -> Any:
        return self._actor_cls.remote(*self._host_args(block), self.autoreset)

    def _replace(self, wid: int, culprit: int) -> dict[int, str]:
        ray = _ray()
        ray.kill(self.hosts[wid], no_restart=True)
        self.restarts += 1
        host = self._start(self.blocks[wid])
        self.hosts[wid] = host
        errors = ray.get(host.restore.remote(self._restore_items(self.blocks[wid], {culprit})), timeout=120)
        return {i: e for i, e in zip(self.blocks[wid], errors) if e is not None}

    def _run(self, call: str, items: dict[int, tuple[Any, ...]], on_result: Any, fault_item: Any) -> dict[int, Any]:
        """Run one actor call per env, at most one in flight per actor, supervising and recovering as it goes.

        One call in flight per actor is what makes blame exact: Ray may lose the reply of a call that finished
        just before its actor died, so with pipelined calls the wrong env could be blamed.
        """
        ray = _ray()
        results: dict[int, Any] = {}
        queues: dict[int, list[int]] = {}
        for i in items:
            queues.setdefault(self._owner[i], []).append(i)
        args = self._quarantine(items, fault_item)
        inflight: dict[Any, tuple[int, int, float]] = {}  # ref -> (host, env index, submitted at)

        def submit(w: int) -> None:
            if queues[w]:
                i = queues[w].pop(0)
                inflight[getattr(self.hosts[w], call).remote(*args[i])] = (w, i, time.monotonic())

        for w in queues:
            submit(w)
        poll = self._poll_interval()
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=poll)
            for ref in ready:
                w, i, _t = inflight.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayActorError as err:
                    msg = f"Ray actor died while running env {i}: {type(err).__name__}"
                    self._recover(w, i, InjectedFault(WorkerCrashed.__name__, msg), queues, args, fault_item)
                    submit(w)
                    continue
                except ray.exceptions.RaySystemError as err:  # serialized in the actor, not deserializable here
                    cause = getattr(err, "client_exc", None) or err
                    res = Undecodable(f"{type(cause).__name__}: {cause}")
                on_result(i, args[i], res)
                results[i] = res
                submit(w)
            now = time.monotonic()
            for ref, (w, i, started) in list(inflight.items()):
                if self.step_timeout is not None and now - started > self.step_timeout:
                    del inflight[ref]
                    msg = f"env {i} exceeded step_timeout={self.step_timeout}s"
                    self._recover(w, i, InjectedFault(StepTimeout.__name__, msg), queues, args, fault_item)
                    submit(w)
        return results

    def _recover(
        self,
        w: int,
        culprit: int,
        fault: InjectedFault,
        queues: dict[int, list[int]],
        args: dict[int, tuple[Any, ...]],
        fault_item: Any,
    ) -> None:
        """Replace host `w`; the culprit's call is resent as an injected fault, ahead of the host's queue."""
        replay_failed = self._replace(w, culprit)
        args[culprit] = fault_item(culprit, args[culprit], fault)
        queues[w].insert(0, culprit)
        for i, why in replay_failed.items():
            if i in queues[w]:
                args[i] = fault_item(i, args[i], InjectedFault("ReplayFailed", why))

    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        self._forgive(indices)
        booked: dict[int, tuple[str, dict[str, Any]]] = {}
        items: dict[int, tuple[Any, ...]] = {i: ((i, s, None),) for i, s in zip(indices, seeds)}
        results = self._run(
            "reset_one",
            items,
            lambda i, item, res: booked.__setitem__(i, self._book_reset(i, res)),
            lambda i, item, fault: ((i, item[0][1], fault),),
        )
        self._discard_undecodable(results)
        return collect_resets(booked[i] for i in indices)

    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        steps: dict[int, EnvStep] = {}
        items: dict[int, tuple[Any, ...]] = {i: (i, a) for i, a in zip(indices, actions)}
        results = self._run(
            "step_one",
            items,
            lambda i, item, res: steps.__setitem__(i, self._book_step(i, item[1], res)),
            lambda i, item, fault: (i, fault),
        )
        lost = self._discard_undecodable(results)
        # "same_step": the reset is a supervised call of its own, so a crash or hang there keeps the final step
        due = self._owing_reset(indices, steps, skip=lost)
        if due:
            resets: dict[int, tuple[str, dict[str, Any]]] = {}
            autoreset = self._run(
                "autoreset_one",
                {i: (i, None) for i in due},
                lambda i, item, res: resets.__setitem__(i, self._book_reset(i, res)),
                lambda i, item, fault: (i, fault),
            )
            self._discard_undecodable(autoreset)
            for i in due:
                steps[i] = EnvSlot.merge_final(resets[i], steps[i])
        return VecStepResult.collect(indices, [steps[i] for i in indices])

    def _discard_undecodable(self, results: dict[int, Any]) -> list[int]:
        """Drop, in their actors, the envs whose result could not be decoded here; returns them."""
        lost = [i for i, res in results.items() if isinstance(res, Undecodable)]
        if lost:
            self._discard(lost)
        return lost

    def _discard(self, indices: list[int]) -> None:
        ray = _ray()
        by_host: dict[int, list[int]] = {}
        for i in indices:
            by_host.setdefault(self._owner[i], []).append(i)
        ray.get([self.hosts[w].discard.remote(idx) for w, idx in by_host.items()])

    def _set_complexity(self, level: int, indices: list[int]) -> None:
        ray = _ray()
        by_host: dict[int, list[tuple[int, int]]] = {}
        for i in indices:
            by_host.setdefault(self._owner[i], []).append((i, level))
        ray.get([self.hosts[w].set_complexity.remote(items) for w, items in by_host.items()])
        self._record_levels(level, indices)

    def _close(self) -> None:
        if not self.hosts:
            return
        ray = _ray()
        with contextlib.suppress(Exception):  # a dead or hung host is killed below either way
            ray.get([h.close.remote() for h in self.hosts], timeout=10)
        for h in self.hosts:
            ray.kill(h, no_restart=True)
        self.hosts = []
