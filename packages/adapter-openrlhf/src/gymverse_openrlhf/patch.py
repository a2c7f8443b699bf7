"""GymVerse in OpenRLHF's classes, in the driver and in every Ray worker: the runtime_env's setup hook (`install`)
reads ``GYMVERSE_OPENRLHF`` and patches OpenRLHF's modules if and when the worker imports them."""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig

EXPERIENCE_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
LAUNCHER = "openrlhf.trainer.ray.launcher"
SETUP_HOOK = "gymverse_openrlhf.patch.install"  # Ray calls it with no argument in every worker


class _PostImport(importlib.abc.MetaPathFinder):
    hooks: dict[str, dict[str, Callable[[ModuleType], None]]] = {}

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname not in self.hooks:
            return None
        keyed = self.hooks.pop(fullname)
        spec = importlib.util.find_spec(fullname)  # the other finders' (ours has no hook for it now)
        if spec is None or spec.loader is None:
            self.hooks[fullname] = keyed  # not found: keep the hooks for a later attempt
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            for patch in keyed.values():
                patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


_finder = _PostImport()


def on_import(name: str, patch: Callable[[ModuleType], None], key: str = "gymverse") -> None:
    """Apply `patch` to module `name` now if loaded, else right after its import (one pending patch per `key`)."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    _finder.hooks.setdefault(name, {})[key] = patch
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def wrap(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace `owner.name` by ``make(original)`` (a GymVerse wrapper already there is replaced, not wrapped)."""
    current = vars(owner)[name]
    original = current.__wrapped__ if getattr(current, "_gymverse", False) else current
    new = make(original)
    new._gymverse, new.__wrapped__ = True, original  # type: ignore[attr-defined]
    setattr(owner, name, new)


def unwrap(owner: Any, name: str) -> None:
    if getattr(getattr(owner, name, None), "_gymverse", False):
        setattr(owner, name, getattr(owner, name).__wrapped__)


def patch_experience_maker(module: ModuleType, cfg: GymVerseConfig) -> None:
    from gymverse_openrlhf.advantages import make_patched

    wrap(module.RemoteExperienceMaker, "compute_advantages_and_returns", lambda original: make_patched(original, cfg))


def patch_launcher(module: ModuleType, cfg: GymVerseConfig) -> None:
    """Each checkpoint tag the trainer saves gets the curriculum in its folder once the model actors saved it."""
    if not cfg.curriculum.active:
        return

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def async_run_method(self: Any, method_name: str, *args: Any, **kwargs: Any) -> Any:
            refs = original(self, method_name, *args, **kwargs)
            if method_name == "save_checkpoint" and "tag" in kwargs:
                import ray
                from gymverse.curriculum.service import save_checkpoint

                from gymverse_openrlhf.curriculum import get_service

                ray.get(refs)
                save_checkpoint(get_service(), os.path.join(cfg.ckpt_path, "_actor", kwargs["tag"]), tag=kwargs["tag"])
            return refs

        return async_run_method

    wrap(module.RayActorGroup, "async_run_method", make)


def install(cfg: GymVerseConfig | None = None) -> GymVerseConfig:
    """Patch OpenRLHF in this process for `cfg` (default: from the environment); a no-op when GymVerse is off."""
    cfg = cfg if cfg is not None else GymVerseConfig.from_json(os.environ.get(ENV_VAR) or "{}")
    if cfg.active:
        on_import(EXPERIENCE_MAKER, lambda m: patch_experience_maker(m, cfg))
        on_import(LAUNCHER, lambda m: patch_launcher(m, cfg))
    return cfg


#: OpenRLHF's own defaults for these variables (it sets them only when it starts Ray itself).
_OPENRLHF_ENV = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1"}
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # a ``ray job submit`` driver's job config, runtime_env included


def runtime_env(cfg: GymVerseConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The launcher's Ray runtime_env minus what a submitted job sets (Ray refuses the same keys twice)."""
    environ = os.environ if environ is None else environ
    job = json.loads(environ.get(JOB_CONFIG_VAR) or "{}").get("runtime_env") or {}
    job_vars = job.get("env_vars") or {}
    if job.get("worker_process_setup_hook") or ENV_VAR in job_vars:
        raise RuntimeError(f"the submitted job's runtime_env sets worker_process_setup_hook or {ENV_VAR}: drop them")
    env = {k: environ.get(k, v) for k, v in _OPENRLHF_ENV.items() if k not in job_vars}
    return {"env_vars": {**env, ENV_VAR: cfg.to_json()}, "worker_process_setup_hook": SETUP_HOOK}
