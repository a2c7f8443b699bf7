"""Turn a checker target (class, factory, registered id, file path, module path) into a level -> Env builder."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gymverse import registry
from gymverse.core import Env
from gymverse.loader import EnvLoadError, is_importable, load_env_class, looks_like_path, split_spec
from gymverse.protocol import EnvLike, is_env_like


class CheckTargetError(ValueError):
    """The checker target cannot be resolved (unknown id, unloadable file, wrong type)."""


@dataclass
class Target:
    """A resolved checker target."""

    label: str
    build: Callable[[int], EnvLike]
    #: The registry id when the target was one (its family must match the metadata's).
    env_id: str | None = None


def _accepts_kwarg(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True  # builtins without signatures: try it and let construction report a TypeError
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _from_factory(factory: Callable[..., EnvLike], label: str, env_kwargs: Mapping[str, Any]) -> Target:
    takes_level = _accepts_kwarg(factory, "complexity")

    def build(level: int) -> EnvLike:
        if takes_level:
            env = factory(**{**env_kwargs, "complexity": level})
        else:
            env = factory(**env_kwargs)
            if is_env_like(env):
                env.set_complexity(level)
        if not is_env_like(env):
            raise TypeError(f"{label} returned {type(env).__name__}, not a gymverse Env (or EnvLike)")
        return env

    return Target(label, build)


def _from_id(env_id: str, env_kwargs: Mapping[str, Any]) -> Target:
    def build(level: int) -> EnvLike:
        return registry.make(env_id, **{**env_kwargs, "complexity": level})

    return Target(env_id, build, env_id=env_id)


def _load(spec: str) -> type[Env]:
    try:
        return load_env_class(spec)
    except EnvLoadError as err:
        raise CheckTargetError(str(err)) from err


def resolve_target(target: object, env_kwargs: Mapping[str, Any] | None = None) -> Target:
    """Resolve `target`; raises `CheckTargetError` with a clear message when it cannot be used."""
    kwargs = dict(env_kwargs or {})
    if isinstance(target, type):
        if not issubclass(target, Env):
            raise CheckTargetError(f"{target.__qualname__} is not a gymverse Env subclass")
        if inspect.isabstract(target):
            missing = ", ".join(sorted(getattr(target, "__abstractmethods__", ())))
            raise CheckTargetError(f"{target.__qualname__} is abstract (does not implement: {missing})")
        return _from_factory(target, f"{target.__module__}:{target.__qualname__}", kwargs)
    if is_env_like(target):
        raise CheckTargetError("pass the Env class or a factory, not an instance: the checker builds fresh envs")
    if isinstance(target, str):
        spec = target.strip()
        where, class_name = split_spec(spec)
        if looks_like_path(where):
            return _from_factory(_load(spec), spec, kwargs)
        try:
            registry.spec(spec)
        except registry.RegistryError as reg_err:
            if class_name is not None and "." in where and is_importable(where):
                return _from_factory(_load(spec), spec, kwargs)
            if class_name is None and is_importable(where):
                return _from_factory(_load(spec), spec, kwargs)
            raise CheckTargetError(str(reg_err)) from reg_err
        return _from_id(spec, kwargs)
    if callable(target):
        label = getattr(target, "__qualname__", None) or repr(target)
        module = getattr(target, "__module__", None)
        return _from_factory(target, f"{module}:{label}" if module else label, kwargs)
    raise CheckTargetError(
        f"cannot check a {type(target).__name__}: expected an Env class, a factory, a registered id "
        "('family:Name'), a file 'path/to/env.py[:Class]' or a module 'pkg.mod:Class'"
    )
