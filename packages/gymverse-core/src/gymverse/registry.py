"""Env registry: ids are ``family:Name``; third-party packages add families through entry points.

Ids of the form ``remote+http://host:port/family:Name`` name an env served by ``gymverse serve`` elsewhere; they
resolve to `gymverse.client.RemoteEnv` without being registered.

An entry point in the group ``gymverse.envs`` names either a module (importing it registers its envs) or a
callable taking no arguments (calling it registers them). The built-in envs (`gymverse.envs`, distribution
gymverse-envs) register through this group like any other plugin; the registry itself needs none installed.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gymverse.core import Env
from gymverse.imports import import_object
from gymverse.protocol import EnvLike, is_env_like

ENTRY_POINT_GROUP = "gymverse.envs"
_ID_RE = re.compile(r"^[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+$")

EnvFactory = Callable[..., EnvLike]


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `candidates` spelled most like `name` (case ignored), best first: for did-you-mean errors."""
    lowered = {c.lower(): c for c in candidates}
    return [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` naming the candidates closest to `name`, or ``""`` when none is close."""
    close = close_names(name, candidates)
    return f"; did you mean {', '.join(close)}?" if close else ""


class RegistryError(LookupError):
    """Unknown, duplicate or unloadable env id."""


@dataclass
class EnvSpec:
    """A registered env: its id, how to build it, and default kwargs."""

    id: str
    entry_point: str | EnvFactory
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def family(self) -> str:
        """The part of the id before the colon."""
        return self.id.split(":", 1)[0]

    def load(self) -> EnvFactory:
        """Resolve the entry point to a callable (importing its module)."""
        if callable(self.entry_point):
            return self.entry_point
        if ":" not in self.entry_point:
            raise RegistryError(f"{self.id}: entry point {self.entry_point!r} must look like 'module:attr'")
        try:
            factory: EnvFactory = import_object(self.entry_point)
        except ImportError as err:
            missing = getattr(err.__cause__, "name", None) or ""  # import_object's cause: the module not found
            if self.entry_point == REMOTE_ENTRY_POINT and missing.startswith("gymverse.client"):
                raise RegistryError(
                    f"{self.id}: remote env ids need the HTTP client: pip install gymverse-server"
                ) from err
            raise RegistryError(f"{self.id}: {err}") from err
        return factory


_REGISTRY: dict[str, EnvSpec] = {}
_LOCK = threading.RLock()
_plugins_loaded = False


def register(env_id: str, entry_point: str | EnvFactory, *, override: bool = False, **defaults: Any) -> EnvSpec:
    """Register `env_id` (``family:Name``); `entry_point` is ``"module:Class"`` or a callable."""
    if not _ID_RE.match(env_id):
        raise ValueError(f"env id {env_id!r} must look like 'family:Name' (letters, digits, _ . -)")
    with _LOCK:
        if env_id in _REGISTRY and not override:
            raise RegistryError(f"env id {env_id!r} is already registered")
        spec = EnvSpec(env_id, entry_point, dict(defaults))
        _REGISTRY[env_id] = spec
        return spec


def deregister(env_id: str) -> None:
    """Remove `env_id` (mainly for tests and reloading synthesized suites)."""
    with _LOCK:
        _REGISTRY.pop(env_id, None)


def _load_plugins() -> None:
    global _plugins_loaded
    with _LOCK:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as err:
                raise RegistryError(
                    f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r} failed to load: "
                    f"{type(err).__name__}: {err}"
                ) from err
            if callable(obj):
                obj()


REMOTE_PREFIX = "remote+"
REMOTE_ENTRY_POINT = "gymverse.client.remote:RemoteEnv"
#: Id prefixes that plugins resolve to a spec themselves (e.g. ``agentgym+`` for AgentGym env servers).
_SCHEMES: dict[str, Callable[[str], EnvSpec]] = {}


def register_scheme(prefix: str, resolver: Callable[[str], EnvSpec]) -> None:
    """Resolve ids starting with `prefix` (such as ``agentgym+``) with `resolver` instead of the registry."""
    if ":" in prefix or not prefix.endswith("+"):
        raise ValueError(f"an id scheme prefix looks like 'name+', got {prefix!r}")
    with _LOCK:
        _SCHEMES[prefix] = resolver


def _scheme_resolver(env_id: str) -> Callable[[str], EnvSpec] | None:
    _load_plugins()
    with _LOCK:
        return next((r for p, r in _SCHEMES.items() if env_id.startswith(p)), None)


def is_proxy_id(env_id: str) -> bool:
    """Whether `env_id` names an env on another server (``remote+http://...``): building it opens a connection."""
    return "://" in env_id


def remote_spec(env_id: str) -> EnvSpec:
    """Spec of a served env id, ``remote+http://host:port[/prefix]/family:Name`` (see `gymverse.client`)."""
    url = env_id[len(REMOTE_PREFIX) :]
    base, _, name = url.rpartition("/")
    if not url.startswith(("http://", "https://")) or "://" not in base or not _ID_RE.match(name):
        raise RegistryError(
            f"remote env id {env_id!r} must look like 'remote+http://host:port/family:Name' (or remote+https://)"
        )
    return EnvSpec(env_id, REMOTE_ENTRY_POINT, {"url": base, "env_id": name})


def spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of `env_id`; unknown ids raise with the closest registered ids."""
    if env_id.startswith(REMOTE_PREFIX):
        return remote_spec(env_id)
    resolver = _scheme_resolver(env_id)
    if resolver is not None:
        return resolver(env_id)
    from gymverse.manifest import ALLOW_VAR, allowed_file, is_file_ref

    if is_file_ref(env_id):  # an env file by path, e.g. from an evaluation manifest: only a file allowed here
        if not allowed_file(env_id):
            raise RegistryError(
                f"{env_id!r} names an env file that is not allowed in this process: pass an evaluation's "
                f"manifest.json (it allows the files it lists) or list the file in {ALLOW_VAR}"
            )
        return EnvSpec(env_id, "gymverse.loader:build_from_ref", {"ref": env_id})
    _load_plugins()
    with _LOCK:
        if env_id in _REGISTRY:
            return _REGISTRY[env_id]
        known = list(_REGISTRY)
    raise RegistryError(f"unknown env id {env_id!r}{did_you_mean(env_id, known)} (see `gymverse list`)")


def make(env_id: str, **kwargs: Any) -> EnvLike:
    """Build `env_id` with its registered defaults overridden by `kwargs` (an `Env`, a wrapper stack or a proxy)."""
    s = spec(env_id)
    factory = s.load()
    env = factory(**{**s.defaults, **kwargs})
    if not is_env_like(env):
        raise RegistryError(f"{env_id}: entry point returned {type(env).__name__}, not a gymverse Env (or EnvLike)")
    env.spec_id = s.id  # type: ignore[attr-defined]
    return env


def env_class(env_id: str) -> type[Env]:
    """The `Env` subclass `env_id` builds (a factory that is not a class is called once to find out)."""
    factory = spec(env_id).load()
    if isinstance(factory, type) and issubclass(factory, Env):
        return factory
    env = make(env_id)
    env.close()
    base = env.unwrapped
    if not isinstance(base, Env):  # a proxy has no class to describe: its env runs elsewhere
        raise RegistryError(f"{env_id} builds a {type(base).__name__} proxy, not a gymverse Env class")
    return type(base)


def list_envs(family: str | None = None) -> list[str]:
    """Registered ids, sorted, optionally only those of `family`."""
    _load_plugins()
    with _LOCK:
        ids = sorted(_REGISTRY)
    if family is not None:
        ids = [i for i in ids if i.split(":", 1)[0] == family]
    return ids


def builtin_ids() -> list[str]:
    """The ids of gymverse-core's own envs (`gymverse.envs`), sorted: not plugins, suites or test fixtures."""
    ids = []
    for env_id in list_envs():
        entry = spec(env_id).entry_point  # read, not loaded: loading a suite's entry point imports the suite
        module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
        if module.startswith("gymverse.envs."):
            ids.append(env_id)
    return ids


def check_env_ids(env_ids: Sequence[str]) -> None:
    """Raise ValueError unless `env_ids` is non-empty, registered and without repeats (unknown ids get close ones)."""
    if not env_ids:
        raise ValueError("give at least one env id")
    from gymverse.manifest import allowed_file, is_file_ref

    known = set(list_envs())
    missing = [
        e
        for e in env_ids
        if e not in known
        and not e.startswith(REMOTE_PREFIX)
        and _scheme_resolver(e) is None
        and not (is_file_ref(e) and allowed_file(e))
    ]
    if missing:
        hints = "".join(f"; {e!r}: did you mean {', '.join(c)}?" for e in missing if (c := close_names(e, known)))
        raise ValueError(f"unknown env id(s) {missing}{hints} (see `gymverse list`)")
    if len(set(env_ids)) != len(env_ids):
        raise ValueError(f"env ids repeat in {list(env_ids)}")


def list_specs(family: str | None = None) -> list[EnvSpec]:
    """Registered specs, sorted by id."""
    return [spec(i) for i in list_envs(family)]
