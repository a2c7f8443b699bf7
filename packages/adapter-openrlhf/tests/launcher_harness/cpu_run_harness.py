"""CPU harness for running OpenRLHF's real launcher in a test (`sitecustomize` installs it in every process).

Active only when `HARNESS_VAR` is ``1`` and `TRACE_VAR` names a folder; then, in the launcher and in every Ray
worker of the run (they inherit the environment, and `sitecustomize` from ``PYTHONPATH``):

- Ray on CPU: the launcher's ``ray.init`` starts a new local cluster with 2 CPUs, 1 *logical* GPU (so OpenRLHF's
  ``{"GPU": 1}`` placement groups schedule; no CUDA is touched), a 200 MB object store and no dashboard.
- `openrlhf.trainer.ray.ppo_actor.PolicyModelActor` (DeepSpeed, CUDA, NCCL) becomes the CPU policy worker of
  `cpu_policy_actor`; every other OpenRLHF class is the real one.
- ``flash_attn.ops.triton.cross_entropy`` fails to import, so OpenRLHF takes its own fallback in
  `openrlhf.models.utils.log_probs_from_logits` (the Triton kernel needs a GPU).
- A function-call tracer: every call of a `TRACED` function appends ``module.qualname pid`` to
  ``<trace dir>/trace-<pid>.txt``, together with (once per process) every OpenRLHF / adapter frame on the stack
  above it, which is how functions of ``__main__`` modules (``train_ppo_ray``) and of Ray actor classes (whose
  methods Ray copies before this hook could wrap them) are recorded. Every rollout batch's experiences, after
  the advantage pass, are saved to ``<trace dir>/experiences-<pid>-<n>.pt`` for the test to check.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

HARNESS_VAR = "GYMVERSE_OPENRLHF_CPU_HARNESS"
TRACE_VAR = "GYMVERSE_OPENRLHF_TRACE_DIR"
#: Ray's temp dir for the run (short: Ray's unix socket paths must stay under 108 characters).
RAY_TMP_VAR = "GYMVERSE_OPENRLHF_RAY_TMP"
RAY_CPUS, RAY_GPUS, OBJECT_STORE_BYTES = 2, 1, 200 * 1024**2

#: Functions wrapped by the tracer, per module (``Class.method`` for methods of plain classes).
TRACED: dict[str, tuple[str, ...]] = {
    "openrlhf.utils.utils": ("get_strategy", "get_tokenizer"),
    "openrlhf.utils.config": ("hierarchize",),
    "openrlhf.utils.deepspeed.deepspeed": ("DeepspeedStrategy.__init__", "DeepspeedStrategy._write_ckpt_metric"),
    "openrlhf.datasets.utils": ("blending_datasets",),
    "openrlhf.datasets.prompts_dataset": ("PromptDataset.__init__",),
    "openrlhf.trainer.ray.vllm_engine": ("create_vllm_engines", "_load_agent_executor", "batch_vllm_engine_call"),
    "openrlhf.trainer.ray.launcher": (
        "RayActorGroup.__init__",
        "RayActorGroup.async_init_model_from_pretrained",
        "RayActorGroup.async_run_method",
        "RayActorGroup.async_run_method_batch",
        "RayActorGroup.async_save_model",
        "BaseDistributedActor.__init__",
        "BaseModelActor.execute_batch",
    ),
    "openrlhf.trainer.ppo_trainer": ("prepare_datasets",),
    "openrlhf.trainer.ppo_utils.samples_generator": (
        "SamplesGenerator.__init__",
        "SamplesGenerator.generate_samples",
        "SamplesGenerator._generate_vllm",
        "SamplesGenerator._dispatch_prompts_to_vllm",
        "SamplesGenerator._process_response_into_experience",
    ),
    "openrlhf.trainer.ppo_utils.experience_maker": (
        "RemoteExperienceMaker.__init__",
        "RemoteExperienceMaker.make_experience_batch",
        "RemoteExperienceMaker.split_rollout_samples",
        "RemoteExperienceMaker.make_experience",
        "RemoteExperienceMaker._dispatch_forward",
        "RemoteExperienceMaker.get_cumulative_returns",
        "RemoteExperienceMaker.get_advantages_and_returns",
    ),
    "openrlhf.trainer.ppo_utils.experience": ("Experience.concat_experiences",),
    "openrlhf.trainer.ppo_utils.length_penalty": ("apply_length_penalties",),
    "openrlhf.models.actor": ("Actor.__init__", "Actor.forward"),
    "openrlhf.models.loss": ("PolicyLoss.forward",),
    "openrlhf.models.utils": ("log_probs_from_logits", "compute_reward", "masked_mean"),
    "gymverse_openrlhf.patch": ("install", "patch_experience_maker", "patch_launcher"),
    "gymverse_openrlhf.curriculum": ("create_actor", "get_service"),
    "gymverse_openrlhf.executor": ("AgentExecutor.execute", "response"),
    "gymverse_openrlhf.advantages": ("gymverse_advantages", "episode_batch"),
}
#: Packages whose frames above a traced call are recorded too.
PACKAGES = ("openrlhf", "gymverse_openrlhf")
#: Ray actor classes (module, class) whose methods are wrapped in the launcher, before Ray ships them.
ACTOR_CLASSES = (
    ("openrlhf.trainer.ray.vllm_engine", "RolloutRayActor"),
    ("openrlhf.trainer.ppo_trainer", "PPOTrainer"),
)

_lock = threading.Lock()
_seen: set[str] = set()


def active() -> bool:
    """Whether this process runs under the harness."""
    return os.environ.get(HARNESS_VAR) == "1" and bool(os.environ.get(TRACE_VAR))


def record(name: str) -> None:
    """Append ``name pid time`` to this process's trace file, and the OpenRLHF/adapter frames above the call."""
    pid = os.getpid()
    lines = [name]
    _seen.add(name)  # a traced function is recorded at each call, never again as a caller
    frame = sys._getframe(1)
    while frame is not None:
        caller = _frame_name(frame)
        if caller is not None and caller not in _seen:
            _seen.add(caller)
            lines.append(caller)
        frame = frame.f_back  # type: ignore[assignment]
    now = time.time()
    with _lock, open(os.path.join(os.environ[TRACE_VAR], f"trace-{pid}.txt"), "a") as fh:
        fh.writelines(f"{line} {pid} {now:.6f}\n" for line in lines)


def _frame_name(frame: Any) -> str | None:
    """``module.qualname`` of a frame in one of `PACKAGES` (module taken from the file, so ``__main__`` too)."""
    path = frame.f_code.co_filename.replace(os.sep, "/")
    for package in PACKAGES:
        marker = f"/{package}/"
        at = path.rfind(marker)
        if at >= 0 and path.endswith(".py"):
            module = path[at + 1 : -3].replace("/", ".").removesuffix(".__init__")
            return f"{module}.{frame.f_code.co_qualname}"
    return None


def traced(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`fn` recording `name` at each call (coroutine functions stay coroutine functions, for Ray's actor checks)."""
    if getattr(fn, "_harness_traced", False):
        return fn
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def acall(*args: Any, **kwargs: Any) -> Any:
            record(name)
            return await fn(*args, **kwargs)

        wrapper: Callable[..., Any] = acall
    else:

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            record(name)  # at the call, not the await: the caller's frames are still on the stack
            return fn(*args, **kwargs)

        wrapper = call
    wrapper._harness_traced = True  # type: ignore[attr-defined]
    return wrapper


def trace_module(module: ModuleType, qualnames: tuple[str, ...]) -> None:
    """Wrap the listed functions and methods of `module` (static and class methods keep their kind)."""
    for qualname in qualnames:
        owner: Any = module
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        name = f"{module.__name__}.{qualname}"
        if isinstance(raw, staticmethod | classmethod):
            setattr(owner, attr, type(raw)(traced(raw.__func__, name)))
        else:
            setattr(owner, attr, traced(raw, name))


def trace_actor_class(module: ModuleType, cls_name: str) -> None:
    """Wrap the methods Ray runs for actor class `cls_name` (its ``modified_class``, shipped to the worker).

    Ray copies every method, inherited ones included, onto that class; those defined in `module` are wrapped.
    """
    modified = getattr(module, cls_name).__ray_metadata__.modified_class
    for attr, value in list(vars(modified).items()):
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            setattr(modified, attr, traced(value, f"{module.__name__}.{value.__qualname__}"))


class BlockImport(importlib.abc.MetaPathFinder):
    """Makes the named modules fail to import (an ImportError, as on a machine without them)."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname in self.names:
            raise ImportError(f"{fullname} is blocked by the CPU harness (a GPU-only Triton kernel)")
        return None


def _patch_ray_init(ray: ModuleType) -> None:
    """The launcher's ``ray.init`` starts a small, new, CPU-only local cluster (see the module docstring)."""
    original = ray.init

    @functools.wraps(original)
    def init(*args: Any, **kwargs: Any) -> Any:
        record("ray.init")
        if not args and kwargs.get("address") is None:
            kwargs["address"] = "local"  # never attach to another cluster on this machine
        kwargs.setdefault("num_cpus", RAY_CPUS)
        kwargs.setdefault("num_gpus", RAY_GPUS)
        kwargs.setdefault("object_store_memory", OBJECT_STORE_BYTES)
        kwargs.setdefault("include_dashboard", False)
        if os.environ.get(RAY_TMP_VAR):
            kwargs.setdefault("_temp_dir", os.environ[RAY_TMP_VAR])
        return original(*args, **kwargs)

    ray.init = init  # type: ignore[attr-defined]


def _replace_policy_actor(module: ModuleType) -> None:
    from cpu_policy_actor import CpuPolicyModelActor

    module.PolicyModelActor = CpuPolicyModelActor  # type: ignore[attr-defined]


def _watch_curriculum_handle(module: ModuleType) -> None:
    """Record when the launcher's curriculum handle is garbage collected (the actor must outlive it)."""
    import weakref

    create = module.create_actor

    @functools.wraps(create)
    def create_actor(*args: Any, **kwargs: Any) -> Any:
        service = create(*args, **kwargs)
        weakref.finalize(service, record, "harness.curriculum_handle_released")
        return service

    module.create_actor = create_actor  # type: ignore[attr-defined]


def _capture_experiences(module: ModuleType) -> None:
    """Save each rollout batch's experiences (after the advantage pass) for the test."""
    cls = module.RemoteExperienceMaker
    make = cls.make_experience_batch
    count = [0]

    @functools.wraps(make)
    def make_experience_batch(self: Any, rollout_samples: Any) -> Any:
        import torch

        experiences = make(self, rollout_samples)
        count[0] += 1
        keys = ("gymverse_complexity", "gymverse_success", "gymverse_error", "gymverse_turns", "gymverse_env_index")
        rows = [
            {
                "labels": list(e.labels),
                "rewards": e.rewards.clone(),
                "action_mask": e.action_mask.clone(),
                "advantages": e.advantages.clone(),
                "returns": e.returns.clone(),
                "sequences": e.sequences.clone(),
                "info": {k: e.info[k].clone() for k in keys if k in e.info},
            }
            for e in experiences
        ]
        path = os.path.join(os.environ[TRACE_VAR], f"experiences-{os.getpid()}-{count[0]}.pt")
        torch.save({"time": time.time(), "experiences": rows}, path)
        return experiences

    cls.make_experience_batch = make_experience_batch


def _trace_after_import(module: ModuleType, qualnames: tuple[str, ...]) -> None:
    trace_module(module, qualnames)


def _trace_actor_after_import(module: ModuleType, cls_name: str) -> None:
    trace_actor_class(module, cls_name)


def _one_thread(torch: ModuleType) -> None:
    torch.set_num_threads(1)


def install() -> None:
    """Install every harness patch in this process (a no-op unless `active`)."""
    if not active():
        return
    from gymverse_openrlhf.patch import on_import

    sys.meta_path.insert(0, BlockImport("flash_attn.ops.triton.cross_entropy"))
    hooks: list[tuple[str, Callable[[ModuleType], None]]] = [
        ("ray", _patch_ray_init),
        ("torch", _one_thread),
        ("openrlhf.trainer.ray.ppo_actor", _replace_policy_actor),
    ]
    hooks += [(name, functools.partial(_trace_after_import, qualnames=q)) for name, q in TRACED.items()]
    hooks += [(name, functools.partial(_trace_actor_after_import, cls_name=c)) for name, c in ACTOR_CLASSES]
    hooks += [
        ("gymverse_openrlhf.curriculum", _watch_curriculum_handle),
        ("openrlhf.trainer.ppo_utils.experience_maker", _capture_experiences),
    ]
    # The adapter's own post-import hooks, each under its own key; registered before the adapter's patches, they
    # run first on a module both patch.
    for i, (name, hook) in enumerate(hooks):
        on_import(name, hook, key=f"cpu-harness:{i}")
