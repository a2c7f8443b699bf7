"""Installing GymVerse into OpenRLHF's classes, in the driver and in every Ray worker.

OpenRLHF builds `RemoteExperienceMaker` inside the trainer actor (a separate Ray worker process), so patching the
driver's class is not enough. The launcher starts Ray with a runtime_env whose ``worker_process_setup_hook`` is
`setup_worker`: every worker of the job runs it at start-up, reads the config from the ``GYMVERSE_OPENRLHF``
variable and patches OpenRLHF's modules when (and only if) that worker imports them.
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
LAUNCHER = "openrlhf.trainer.ray.launcher"
SETUP_HOOK = "gymverse_openrlhf.patch.setup_worker"


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the patches on the fresh module, in registration order."""

    def __init__(self, loader: Any, after: list[Callable[[ModuleType], None]]) -> None:
        self.loader, self.after = loader, after

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
        for finder in sys.meta_path:
            spec = None if finder is self or not hasattr(finder, "find_spec") else finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, list(keyed.values()))
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


def wrap(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace method `name` of `cls` by ``make(original)`` (idempotent: a GymVerse wrapper is replaced)."""
    current = cls.__dict__[name]
    original = current.__wrapped__ if getattr(current, "_gymverse", False) else current
    new = make(original)
    new._gymverse, new.__wrapped__ = True, original  # type: ignore[attr-defined]
    setattr(cls, name, new)


def unwrap(cls: Any, name: str) -> None:
    """Restore OpenRLHF's own method."""
    current = cls.__dict__[name]
    if getattr(current, "_gymverse", False):
        setattr(cls, name, current.__wrapped__)


def patch_experience_maker(module: ModuleType, cfg: GymVerseConfig) -> None:
    """`RemoteExperienceMaker.compute_advantages_and_returns` becomes GymVerse's (`gymverse_openrlhf.advantages`)."""
    from gymverse_openrlhf.advantages import make_patched

    wrap(module.RemoteExperienceMaker, "compute_advantages_and_returns", lambda original: make_patched(original, cfg))


def patch_launcher(module: ModuleType, cfg: GymVerseConfig) -> None:
    """Each checkpoint tag OpenRLHF saves (``global_stepN``, ``best_global_stepN``) gets the curriculum state in its
    folder, right after the model actors saved it (trainer side: `RayActorGroup.async_run_method`)."""
    if not cfg.curriculum.active:
        return

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def async_run_method(self: Any, method_name: str, *args: Any, **kwargs: Any) -> Any:
            refs = original(self, method_name, *args, **kwargs)
            if method_name == "save_checkpoint" and "tag" in kwargs:
                import ray
                from gymverse.curriculum.service import save_checkpoint

                from gymverse_openrlhf.curriculum import get_service, tag_folder

                ray.get(refs)  # DeepSpeed's files (and its rotation) first, then ours into the tag's folder
                save_checkpoint(get_service(), tag_folder(cfg.ckpt_path, kwargs["tag"]), tag=kwargs["tag"])
            return refs

        return async_run_method

    wrap(module.RayActorGroup, "async_run_method", make)


def install(cfg: GymVerseConfig | None = None) -> GymVerseConfig:
    """Patch OpenRLHF in this process for `cfg` (default: from the environment); a no-op when GymVerse is off."""
    cfg = cfg if cfg is not None else GymVerseConfig.from_env()
    if cfg.active:
        on_import(EXPERIENCE_MAKER, lambda m: patch_experience_maker(m, cfg))
        on_import(LAUNCHER, lambda m: patch_launcher(m, cfg))
    return cfg


def setup_worker() -> None:
    """Ray ``worker_process_setup_hook``: install the patches configured for this job."""
    install()


#: OpenRLHF's own defaults for these variables (it sets them only when it starts Ray itself).
_OPENRLHF_ENV = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1"}
#: Set by Ray's job manager in a driver started with ``ray job submit`` (the job's config, runtime_env included).
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def runtime_env(cfg: GymVerseConfig, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Ray runtime_env the launcher starts Ray with, minus what a submitted job already sets (Ray refuses to
    merge the same keys twice); a job's own GymVerse hook or config is refused."""
    environ = os.environ if environ is None else environ
    env = {k: environ.get(k, v) for k, v in _OPENRLHF_ENV.items()}
    env[ENV_VAR] = cfg.to_json()
    job = json.loads(environ.get(JOB_CONFIG_VAR) or "{}").get("runtime_env") or {}
    hook, job_vars = job.get("worker_process_setup_hook"), job.get("env_vars") or {}
    if hook not in (None, SETUP_HOOK):
        raise RuntimeError(
            f"the submitted job's runtime_env sets worker_process_setup_hook={hook!r}; GymVerse needs {SETUP_HOOK!r} "
            "(call gymverse_openrlhf.patch.setup_worker from your hook instead)"
        )
    if ENV_VAR in job_vars:
        raise RuntimeError(f"the submitted job's runtime_env sets {ENV_VAR}: drop it, the launcher sets it")
    out: dict[str, Any] = {"env_vars": {k: v for k, v in env.items() if k not in job_vars}}
    if hook is None:
        out["worker_process_setup_hook"] = SETUP_HOOK
    return out
