"""Installing GymVerse into OpenRLHF's classes, in the driver and in every Ray worker.

OpenRLHF builds `RemoteExperienceMaker` inside the trainer actor (a separate Ray worker process, a further one
in async mode), so patching the driver's class is not enough. The launcher starts Ray with a runtime_env whose
``worker_process_setup_hook`` is `setup_worker`: every worker of the job runs it at start-up, reads the config
from the ``GYMVERSE_OPENRLHF`` variable and patches OpenRLHF's modules when (and only if) that worker imports
them, so vLLM and model workers do not pay for imports they never make.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig

EXPERIENCE_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
TRAINER = "openrlhf.trainer.ppo_trainer"
SETUP_HOOK = "gymverse_openrlhf.patch.setup_worker"


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the patches on the fresh module, in registration order."""

    def __init__(self, loader: Any, after: list[Callable[[ModuleType], None]]) -> None:
        self.loader = loader
        self.after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        for patch in self.after:
            patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... for inspect and pkgutil
        return getattr(self.loader, name)


class _PostImport(importlib.abc.MetaPathFinder):
    """Runs callbacks on a module right after its first import (one per key, in registration order)."""

    def __init__(self) -> None:
        self.hooks: dict[str, dict[str, Callable[[ModuleType], None]]] = {}

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        keyed = self.hooks.pop(fullname, None)
        if keyed is None:
            return None
        after = list(keyed.values())
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, after)
                return spec
        self.hooks[fullname] = keyed  # not found here: leave the hooks for a later attempt
        return None


_finder = _PostImport()


def on_import(name: str, patch: Callable[[ModuleType], None], key: str = "gymverse") -> None:
    """Apply `patch` to module `name` now if it is loaded, else right after it gets imported; a later `patch`
    with the same `key` replaces a pending one (the last `install` wins), other keys' patches run too."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
        return
    _finder.hooks.setdefault(name, {})[key] = patch
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def patch_experience_maker(module: ModuleType, cfg: GymVerseConfig) -> None:
    """Swap `RemoteExperienceMaker.compute_advantages_and_returns` for the GymVerse version (idempotent)."""
    from gymverse_openrlhf.advantages import make_patched

    cls = module.RemoteExperienceMaker
    current = cls.__dict__["compute_advantages_and_returns"]
    original = getattr(current, "__wrapped__", current) if getattr(current, "_gymverse", False) else current
    new = make_patched(original, cfg)
    new._gymverse = True  # type: ignore[attr-defined]
    cls.compute_advantages_and_returns = new


def unpatch_experience_maker(module: ModuleType) -> None:
    """Restore OpenRLHF's own method."""
    cls = module.RemoteExperienceMaker
    current = cls.__dict__["compute_advantages_and_returns"]
    if getattr(current, "_gymverse", False):
        cls.compute_advantages_and_returns = current.__wrapped__


def patch_trainer(module: ModuleType, cfg: GymVerseConfig) -> None:
    """Save the curriculum next to each OpenRLHF checkpoint and log the levels (only with evolution on)."""
    if not cfg.evolve:
        return
    cls = module.BasePPOTrainer
    current = cls.__dict__["save_logs_and_checkpoints"]
    if getattr(current, "_gymverse", False):
        return

    def save_logs_and_checkpoints(
        self: Any, global_step: int, logs_dict: dict[str, Any] | None = None, client_states: Any = None
    ) -> None:
        from gymverse_openrlhf.curriculum import get_service, state_path

        service = get_service()
        logs = dict(logs_dict or {})
        for env_id, level in service.levels().items():
            logs[f"gymverse/level/{env_id}"] = level
        current(self, global_step, logs, client_states)
        if global_step % self.args.ckpt.save_steps == 0:
            service.save(state_path(cfg.ckpt_path or self.args.ckpt.path), global_step=global_step)

    save_logs_and_checkpoints._gymverse = True  # type: ignore[attr-defined]
    save_logs_and_checkpoints.__wrapped__ = current  # type: ignore[attr-defined]
    cls.save_logs_and_checkpoints = save_logs_and_checkpoints
    # `ray.remote` copies every method, inherited ones included, onto the class it runs (Ray's tracing wrappers,
    # `_inject_tracing_into_class`) while the module executes, so `PPOTrainer` keeps the original unless its copy
    # is replaced too. This must happen in the driver, before Ray ships the class to the trainer's worker.
    for actor in _ray_actor_classes(module):
        if "save_logs_and_checkpoints" in actor.__dict__:
            actor.save_logs_and_checkpoints = save_logs_and_checkpoints


def _ray_actor_classes(module: ModuleType) -> list[Any]:
    """The classes Ray instantiates for the module's ``@ray.remote`` actors."""
    return [obj.__ray_metadata__.modified_class for obj in vars(module).values() if hasattr(obj, "__ray_metadata__")]


def unpatch_trainer(module: ModuleType) -> None:
    """Restore OpenRLHF's own checkpoint step (base class and actor classes)."""
    for cls in [module.BasePPOTrainer, *_ray_actor_classes(module)]:
        current = cls.__dict__.get("save_logs_and_checkpoints")
        if getattr(current, "_gymverse", False):
            cls.save_logs_and_checkpoints = current.__wrapped__


def install(cfg: GymVerseConfig | None = None) -> GymVerseConfig:
    """Patch OpenRLHF in this process for `cfg` (default: from the environment); a no-op when GymVerse is off."""
    cfg = cfg if cfg is not None else GymVerseConfig.from_env()
    if cfg.active:
        on_import(EXPERIENCE_MAKER, lambda m: patch_experience_maker(m, cfg))
        on_import(TRAINER, lambda m: patch_trainer(m, cfg))
    return cfg


def setup_worker() -> None:
    """Ray ``worker_process_setup_hook``: install the patches configured for this job."""
    install()


#: OpenRLHF's own defaults for these variables (it sets them only when it starts Ray itself).
_OPENRLHF_ENV = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1"}


def runtime_env(cfg: GymVerseConfig) -> dict[str, Any]:
    """The Ray runtime_env of a GymVerse run (also what to pass to ``ray job submit --runtime-env-json``)."""
    env = {k: os.environ.get(k, v) for k, v in _OPENRLHF_ENV.items()}
    env[ENV_VAR] = cfg.to_json()
    return {"env_vars": env, "worker_process_setup_hook": SETUP_HOOK}


#: Set by Ray's job manager in a driver started with ``ray job submit`` (the job's config, runtime_env included).
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def driver_runtime_env(cfg: GymVerseConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`runtime_env` minus what a submitted job already sets (Ray refuses to merge the same keys twice).

    A job's own value for a GymVerse key must agree with ours; otherwise the workers would run another config.
    """
    ours = runtime_env(cfg)
    raw = (os.environ if environ is None else environ).get(JOB_CONFIG_VAR)
    if not raw:
        return ours
    job = json.loads(raw).get("runtime_env") or {}
    hook = job.get("worker_process_setup_hook")
    if hook is not None and hook != SETUP_HOOK:
        raise RuntimeError(
            f"the submitted job's runtime_env sets worker_process_setup_hook={hook!r}; GymVerse needs {SETUP_HOOK!r} "
            "(call gymverse_openrlhf.patch.setup_worker from your hook instead)"
        )
    job_vars = job.get("env_vars") or {}
    if ENV_VAR in job_vars and job_vars[ENV_VAR] != ours["env_vars"][ENV_VAR]:
        raise RuntimeError(
            f"the submitted job's {ENV_VAR} differs from this command's --gymverse.*/--ckpt.* flags; "
            "pass the same flags to `gymverse-openrlhf runtime-env` or drop it from --runtime-env-json"
        )
    out: dict[str, Any] = {"env_vars": {k: v for k, v in ours["env_vars"].items() if k not in job_vars}}
    if hook is None:
        out["worker_process_setup_hook"] = SETUP_HOOK
    return out
