"""Load GEM-style env files (as LLMs write them) into `GemEnvAdapter`s: import, pick the class, read conventions."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from gymverse.compat import gem_conventions as conv
from gymverse.compat._gem_shim import LanguageGameReward, gem_modules
from gymverse.compat.gem import ComplexityKwargs, GemEnvAdapter, GemLoadError, SuccessRule
from gymverse.imports import split_spec


def _import_file(path: Path, use_shim: bool | None) -> tuple[ModuleType, bool]:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mod_name = f"gymverse_gem_file_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise GemLoadError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    with gem_modules(use_shim) as shimmed:
        # registered only while it executes (dataclasses and typing look it up there), then removed again
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as err:
            raise GemLoadError(f"{path}:{err.lineno}: syntax error: {err.msg}") from err
        except ImportError as err:
            hint = ""
            if shimmed and (err.name or "").startswith("gem"):
                hint = (
                    " (gem-llm is not installed; GymVerse's stand-in provides only gem.core, gem.utils.constants, "
                    "gem.utils.seeding and gem.utils.parsing: install gem-llm for the rest)"
                )
            raise GemLoadError(f"{path}: import failed: {err}{hint}") from err
        except Exception as err:
            raise GemLoadError(f"{path}: executing the file raised {type(err).__name__}: {err}") from err
        finally:
            sys.modules.pop(mod_name, None)
    return module, shimmed


def _pick_class(module: ModuleType, path: Path, class_name: str | None) -> type:
    defined = [obj for obj in vars(module).values() if isinstance(obj, type) and obj.__module__ == module.__name__]
    if class_name is not None:
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type):
            names = ", ".join(sorted(c.__name__ for c in defined)) or "none"
            raise GemLoadError(f"{path}: no class {class_name!r} (classes defined there: {names})")
        return cls
    envs = conv.env_classes(vars(module), module.__name__)
    if not envs:
        names = ", ".join(sorted(c.__name__ for c in defined)) or "none"
        raise GemLoadError(f"{path}: no env class with reset() and step() (classes defined there: {names})")
    return conv.base_class(envs)  # several (e.g. X and XWithFeedback): the base env; others by class_name


def load_gem_env_file(
    path: str | Path,
    class_name: str | None = None,
    *,
    complexity_kwargs: ComplexityKwargs | None = None,
    success_from: SuccessRule = "info",
    success_reward: float = LanguageGameReward.success_reward,
    format_error_reward: float | None = None,
    complexity_knob: str | None = "auto",
    reward_range: tuple[float, float] | None = None,
    family: str = "gem",
    name: str | None = None,
    complexity: int = 1,
    seed: int | None = None,
    use_shim: bool | None = None,
    **kwargs: Any,
) -> GemEnvAdapter:
    """Load a GEM-style env file (works without gem-llm installed) and return it as a GymVerse `Env`.

    The file is executed as a fresh module, once per content version (cached by path, mtime and size); ``gem.*``
    imports are served by the real package when installed, otherwise by GymVerse's stand-in
    (`gymverse.compat._gem_shim`), which is in ``sys.modules`` only while the file's code runs (import,
    construction, reset, step). `class_name` picks the env class when the file defines
    several (default: the base env, e.g. ``X`` rather than ``XWithFeedback``). ``success_from="auto"`` infers the
    success rule and reward range from the rewards the class's ``step`` returns (`gem_conventions`); the
    complexity knob is detected unless `complexity_kwargs` or ``complexity_knob=None`` says otherwise.
    Remaining `kwargs` go to the env's constructor; the other arguments are `GemEnvAdapter`'s.
    Errors (missing file, syntax, imports, constructor) raise `GemLoadError` naming the file.
    """
    p = Path(path).resolve()
    if not p.is_file():
        raise GemLoadError(f"{p}: no such file")
    stat = p.stat()
    module, shimmed = _import_cached(str(p), stat.st_mtime_ns, stat.st_size, use_shim)
    cls = _pick_class(module, p, class_name)
    rule_note, rule_source = "given", "given"
    if success_from == "auto":
        found = _conventions_cached(str(p), stat.st_mtime_ns, stat.st_size, cls)
        rule_note, rule_source = "inferred from the rewards step() returns", "inferred"
        if found.success_rule is None:  # kept visible: `success_rule` says so and evaluations report it
            rule_note, rule_source = "none inferred: step() returns no positive reward literal", "none"
        success_from = str(found.success_rule or "info")
        reward_range = reward_range or found.reward_range
    if complexity_kwargs is not None and complexity_knob == "auto":
        complexity_knob = None
    try:
        env = GemEnvAdapter(
            factory=cls,
            kwargs=kwargs,
            complexity_kwargs=complexity_kwargs,
            name=name,
            family=family,
            success_from=success_from,
            success_reward=success_reward,
            format_error_reward=format_error_reward,
            complexity_knob=complexity_knob,
            reward_range=reward_range,
            use_shim=True if shimmed else None,
            complexity=complexity,
            seed=seed,
        )
    except GemLoadError as err:
        raise GemLoadError(f"{p}: {err}") from err.__cause__
    env.success_rule_note = rule_note
    env.success_rule_source = rule_source
    env.gem_uses_numpy = _mentions_numpy(str(p), stat.st_mtime_ns, stat.st_size)
    return env


@functools.lru_cache(maxsize=64)
def _import_cached(path: str, mtime_ns: int, size: int, use_shim: bool | None) -> tuple[ModuleType, bool]:
    # one execution of a file per content version: evaluation builds the same env dozens of times per job
    return _import_file(Path(path), use_shim)


@functools.lru_cache(maxsize=64)
def _conventions_cached(path: str, mtime_ns: int, size: int, cls: type) -> conv.RewardConventions:
    return conventions_for(Path(path).read_text(encoding="utf-8"), cls)


@functools.lru_cache(maxsize=64)
def _mentions_numpy(path: str, mtime_ns: int, size: int) -> bool:
    return "numpy" in Path(path).read_text(encoding="utf-8")


def conventions_for(source: str, cls: type) -> conv.RewardConventions:
    """The reward conventions of `cls` and the classes of its file it derives from."""
    names = [c.__name__ for c in cls.__mro__ if c.__module__ == cls.__module__]
    return conv.infer_reward_conventions(source, names)


def build_ref(ref: str, complexity: int = 1, seed: int | None = None) -> GemEnvAdapter:
    """The env of a ``gem:path.py[:Class][|success rule]`` reference (the core loader's ``gem`` ref builder)."""
    body, _, rule = ref.removeprefix("gem:").partition("|")
    where, class_name = split_spec(body)
    return load_gem_env_file(where, class_name, success_from=rule or "auto", complexity=complexity, seed=seed)


__all__ = ["build_ref", "conventions_for", "load_gem_env_file"]
