"""Runs verl's own ``TaskRunnerV1`` in the test process and records which verl functions ran, in this process
(wrappers put in place with pytest's monkeypatch) and in verl's Ray workers (a ``worker_process_setup_hook`` that
wraps the agent-loop worker's methods when verl's agent-loop module is imported there)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import pytest

CALL_LOG = "GYMVERSE_VERL_CALL_LOG"

# verl functions wrapped in the test process (where the TaskRunner and the trainer run)
DRIVER_CALLS: dict[str, list[tuple[str | None, str]]] = {
    "verl.trainer.ppo.v1.trainer_base": [
        ("PPOTrainer", "fit"),
        ("PPOTrainer", "_validate"),
        ("PPOTrainer", "step"),
        ("PPOTrainer", "prepare_step"),
        ("PPOTrainer", "_submit_batch_to_rollout"),
        ("PPOTrainer", "_step_once"),
        ("PPOTrainer", "_balance_batch"),
        ("PPOTrainer", "_compute_old_log_prob"),
        ("PPOTrainer", "_compute_advantage"),
        ("PPOTrainer", "_update_actor"),
        ("PPOTrainer", "_save_checkpoint"),
        ("PPOTrainer", "_load_checkpoint"),
        ("PPOTrainer", "_compute_metrics"),
    ],
    "verl.trainer.ppo.v1.replay_buffer": [("ReplayBuffer", "sample")],
    "verl.trainer.ppo.v1.utils": [(None, "compute_advantage_for_multi_trajectories")],
    "verl.checkpoint_engine.base": [("CheckpointEngineManager", "update_weights")],
    "verl.trainer.ppo.v1.trainer_sync": [("PPOTrainerSync", "on_step_end"), ("PPOTrainerSync", "on_sample_end")],
}
# verl functions wrapped inside the agent-loop worker (a Ray actor process)
# (``AgentLoopWorkerTQ.generate_sequences`` itself is bound by Ray before a wrapper can reach it; it is what calls
# ``_run_prompt``)
WORKER_CALLS = [
    "AgentLoopWorkerTQ._run_prompt",
    "AgentLoopWorker._run_agent_loop",
    "AgentLoopWorkerTQ._agent_loop_postprocess",
    "AgentLoopWorker._compute_score",
    "LLMServerClient.generate",
]


def _record(name: str) -> None:
    path = os.environ.get(CALL_LOG)
    if path:
        with open(path, "a") as f:
            f.write(name + "\n")


def _wrap(owner: Any, attr: str, name: str) -> None:
    """Replace ``owner.attr`` by a wrapper that records `name` on entry (async functions stay async)."""
    import inspect

    fn = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
    if getattr(fn, "__gymverse_recorded__", False):
        return
    if inspect.iscoroutinefunction(fn):

        @wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            _record(name)
            return await fn(*args, **kwargs)
    else:

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _record(name)
            return fn(*args, **kwargs)

    wrapper.__gymverse_recorded__ = True  # type: ignore[attr-defined]
    setattr(owner, attr, wrapper)


def _instrument_worker(worker_cls: type) -> None:
    """Wrap the agent-loop worker's methods on the classes that define them (the actor's own class copies)."""
    for qual in WORKER_CALLS:
        cls_name, attr = qual.split(".")
        if cls_name == "LLMServerClient":
            continue
        _wrap(next(c for c in worker_cls.__mro__ if attr in c.__dict__), attr, qual)


class _OnImport(importlib.abc.MetaPathFinder):
    """Runs `hook(module)` right after `name` is imported (the hook runs before anything imports verl)."""

    def __init__(self, name: str, hook: Callable[[Any], None]) -> None:
        self.name, self.hook = name, hook

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        assert spec is not None and spec.loader is not None
        exec_module, hook = spec.loader.exec_module, self.hook

        def run(module: Any) -> None:
            exec_module(module)
            hook(module)

        spec.loader.exec_module = run  # type: ignore[method-assign]
        return spec


def worker_setup_hook() -> None:
    """Ray ``worker_process_setup_hook``: record the agent-loop worker's verl calls in this process."""

    def on_agent_loop(module: Any) -> None:
        init = module.AgentLoopWorker.__init__

        @wraps(init)
        def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            _instrument_worker(type(self))
            _wrap(type(self.llm_client), "generate", "LLMServerClient.generate")

        module.AgentLoopWorker.__init__ = recording_init

    sys.meta_path.insert(0, _OnImport("verl.experimental.agent_loop.agent_loop", on_agent_loop))


class Recorder:
    """Wraps verl's driver-side functions (see DRIVER_CALLS) and collects what the run logged and trained."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import importlib

        import verl.utils.tracking as tracking

        self.logged: list[tuple[int, dict[str, Any]]] = []
        self.trained: dict[int, list[int]] = {}
        for module_name, names in DRIVER_CALLS.items():
            module = importlib.import_module(module_name)
            for cls_name, attr in names:
                owner = getattr(module, cls_name) if cls_name else module
                monkeypatch.setattr(owner, attr, self._recording(owner, attr, f"{cls_name or module_name}.{attr}"))
        # the estimator call is bound in trainer_base's namespace
        import verl.trainer.ppo.v1.trainer_base as trainer_base
        import verl.trainer.ppo.v1.utils as v1_utils

        monkeypatch.setattr(
            trainer_base,
            "compute_advantage_for_multi_trajectories",
            v1_utils.compute_advantage_for_multi_trajectories,
        )
        log = tracking.Tracking.log
        recorder = self

        def record_log(self: Any, data: dict[str, Any], step: int, **kw: Any) -> Any:
            recorder.logged.append((step, dict(data)))
            return log(self, data, step, **kw)

        monkeypatch.setattr(tracking.Tracking, "log", record_log)
        advantage = trainer_base.PPOTrainer._compute_advantage

        def record_trained(self: Any, batch: Any, metrics: dict[str, Any]) -> Any:
            import transfer_queue as tq

            rows = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_info"])
            self_steps = int(self.global_steps)
            recorder.trained[self_steps] = sorted({int(x["index"]) for x in rows["extra_info"]})
            return advantage(self, batch, metrics)

        monkeypatch.setattr(trainer_base.PPOTrainer, "_compute_advantage", record_trained)

    @staticmethod
    def _recording(owner: Any, attr: str, name: str) -> Any:
        fn = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _record(name)
            return fn(*args, **kwargs)

        return wrapper


def run_task_runner(config: Any) -> None:
    """verl's ``TaskRunnerV1.run`` (what ``main_ppo`` runs in a Ray actor), here in the test process."""
    import copy

    from verl.trainer.main_ppo import TaskRunnerV1

    runner_cls = TaskRunnerV1.__ray_metadata__.modified_class.__mro__[1]  # the class under @ray.remote
    runner_cls().run(copy.deepcopy(config))


def driver_calls(calls: list[str]) -> list[str]:
    names = {f"{c or m}.{a}" for m, pairs in DRIVER_CALLS.items() for c, a in pairs}
    return [c for c in calls if c in names]


def worker_counts(calls: list[str]) -> dict[str, int]:
    from collections import Counter

    return dict(Counter(c for c in calls if c in WORKER_CALLS))
