"""Load an `Env` subclass from a file path (``path/to/env.py[:ClassName]``) or a module (``pkg.mod[:ClassName]``).

This is how the checker, the CLI and the synthesis sandbox reach environment programs that are not registered.
When no class is named, the single concrete `Env` subclass *defined* in that file/module is taken (classes merely
imported into it do not count). Every failure raises `EnvLoadError` with a message that names the file.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from gymverse.core import Env, Wrapper
from gymverse.imports import split_spec
from gymverse.protocol import EnvLike


class EnvLoadError(ValueError):
    """The spec does not lead to exactly one loadable `Env` subclass."""


def looks_like_path(where: str) -> bool:
    """True when `where` names a file rather than a dotted module."""
    return where.endswith(".py") or "/" in where or "\\" in where or Path(where).is_file()


def load_module_from_file(path: str | Path) -> ModuleType:
    """Execute a Python file as a fresh module (cached by path and content) and return it."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise EnvLoadError(f"{file}: no such file")
    try:
        source = file.read_bytes()
    except OSError as err:
        raise EnvLoadError(f"{file}: cannot read: {err}") from err
    digest = hashlib.sha1(str(file.resolve()).encode() + b"\0" + source).hexdigest()[:12]
    stem = "".join(c if c.isalnum() else "_" for c in file.stem)
    mod_name = f"_gymverse_file_{stem}_{digest}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    try:
        code = compile(source, str(file), "exec")
    except SyntaxError as err:
        raise EnvLoadError(f"{file}:{err.lineno}: syntax error: {err.msg}") from err
    except ValueError as err:  # e.g. null bytes in the source
        raise EnvLoadError(f"{file}: cannot compile: {err}") from err
    module = ModuleType(mod_name)
    module.__file__ = str(file)
    # Registered before exec so dataclasses, pickling and typing can find the module by name.
    sys.modules[mod_name] = module
    try:
        exec(code, module.__dict__)
    except BaseException as err:
        del sys.modules[mod_name]
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        raise EnvLoadError(f"{file}: executing the file failed: {type(err).__name__}: {err}") from err
    return module


def _import_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and name.startswith(err.name):
            raise EnvLoadError(f"cannot import module {name!r}: no module named {err.name!r}") from err
        raise EnvLoadError(f"module {name!r}: importing it failed: {type(err).__name__}: {err}") from err
    except Exception as err:
        raise EnvLoadError(f"module {name!r}: importing it failed: {type(err).__name__}: {err}") from err


def env_classes(module: ModuleType) -> list[type[Env]]:
    """Concrete `Env` subclasses (not wrappers) defined in `module` itself, in definition order."""
    found = []
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and issubclass(obj, Env)
            and not issubclass(obj, Wrapper)
            and obj.__module__ == module.__name__
            and not inspect.isabstract(obj)
        ):
            found.append(obj)
    return found


def _pick(module: ModuleType, origin: str, class_name: str | None) -> type[Env]:
    if class_name is not None:
        obj = getattr(module, class_name, None)
        if obj is None:
            available = ", ".join(c.__name__ for c in env_classes(module)) or "none"
            raise EnvLoadError(f"{origin}: no class {class_name!r} (Env subclasses defined there: {available})")
        if not (isinstance(obj, type) and issubclass(obj, Env)):
            raise EnvLoadError(f"{origin}: {class_name!r} is a {type(obj).__name__}, not a gymverse Env subclass")
        if inspect.isabstract(obj):
            missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
            raise EnvLoadError(f"{origin}: {class_name} is abstract (does not implement: {missing})")
        return obj
    candidates = env_classes(module)
    if not candidates:
        abstract = [
            n
            for n, o in vars(module).items()
            if isinstance(o, type) and issubclass(o, Env) and o.__module__ == module.__name__ and inspect.isabstract(o)
        ]
        hint = f" ({', '.join(abstract)} left abstract methods unimplemented)" if abstract else ""
        raise EnvLoadError(f"{origin}: defines no concrete gymverse Env subclass{hint}")
    if len(candidates) > 1:
        names = ", ".join(c.__name__ for c in candidates)
        raise EnvLoadError(f"{origin}: defines several Env subclasses ({names}); name one as '{origin}:ClassName'")
    return candidates[0]


def load_env_class(spec: str) -> type[Env]:
    """The Env class named by ``path/to/file.py[:Class]`` or ``pkg.module[:Class]``."""
    if not isinstance(spec, str) or not spec.strip():
        raise EnvLoadError(f"expected 'path/to/file.py[:Class]' or 'pkg.module[:Class]', got {spec!r}")
    where, class_name = split_spec(spec.strip())
    if looks_like_path(where):
        return _pick(load_module_from_file(where), where, class_name)
    return _pick(_import_module(where), where, class_name)


def build_from_ref(ref: str, complexity: int = 1, seed: int | None = None) -> EnvLike:
    """Build the env a reference names at `complexity`: ``gem:path.py[:Class][|success rule]`` (a GEM-style file,
    rule inferred unless given), ``file:path.py[:Class]`` (a GymVerse env file) or a registered id."""
    if ref.startswith("gem:"):  # GEM-style files: the gymverse-gem package builds them (entry-point group)
        return _ref_builder("gem")(ref, complexity=complexity, seed=seed)
    if ref.startswith("file:"):
        return load_env_class(ref.removeprefix("file:"))(complexity=complexity, seed=seed)
    from gymverse import registry

    return registry.make(ref, complexity=complexity, seed=seed)


#: Entry-point group of the packages that build file references of their own kind: the entry point named ``gem``
#: builds ``gem:path.py[:Class][|rule]`` (gymverse-gem), called as ``builder(ref, complexity=..., seed=...)``.
REF_BUILDERS_GROUP = "gymverse.refs"


@functools.cache  # found once per process: the scan reads every installed distribution's metadata (ms per build)
def _ref_builder(kind: str) -> Callable[..., EnvLike]:
    found = importlib.metadata.entry_points(group=REF_BUILDERS_GROUP, name=kind)
    if not found:
        raise EnvLoadError(f"'{kind}:' env files need the gymverse-{kind} package: pip install gymverse-{kind}")
    builder: Callable[..., Env] = next(iter(found)).load()
    return builder


def prepare_ref(ref: str) -> None:
    """Import what building `ref` needs, without building it: a registered id's entry point (an installed suite can
    take seconds to import); env files are read when built."""
    if ref.startswith(("gem:", "file:")):
        return
    from gymverse import registry

    registry.spec(ref).load()


def is_importable(module_name: str) -> bool:
    """True when `module_name` can be found without executing it (parent packages may be imported)."""
    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


__all__ = [
    "EnvLoadError",
    "build_from_ref",
    "env_classes",
    "is_importable",
    "load_env_class",
    "load_module_from_file",
    "prepare_ref",
    "split_spec",
]
