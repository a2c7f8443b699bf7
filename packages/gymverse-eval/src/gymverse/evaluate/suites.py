"""Suites of environments to evaluate: built-in families, synthesized artifact directories, GEM-style env files.

An `EnvEntry` describes one environment *without executing its code* (untrusted programs only ever run inside the
sandbox workers): its `ref` is a short string that `build_env` turns into a live `Env` in the worker. Descriptions,
domains and source text come from the registry (built-ins), ``spec.json`` (artifacts) or the file's AST.

Suite specs accepted by `load_suite`: ``None``/``"builtin"`` (the envs shipped in `gymverse.envs`), ``"all"``
(every registered env), a family (``"game"``), a registered id (``"game:Mastermind"``), an artifact directory
(``env.py`` + ``spec.json``), a directory of artifacts, a ``.py`` env file (GymVerse or GEM style), a directory of
such files, or several of these joined by commas.

GEM-style files as LLMs write them (`gymverse.compat.gem_conventions`): a file with several env classes (``X`` and
``XWithFeedback``) gives its base env, or every env class with ``all_classes``, or the class named by
``class_name``; a file with no env class (a helper, a solver script) is skipped with a note in `Suite.skipped`; a
file that needs a newer Python or a missing package is an entry whose `load_error` says exactly that. A GEM ref is
``gem:/abs/file.py[:Class][|success rule]`` (the rule defaults to inference from the file's rewards).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gymverse.core import Env
from gymverse.loader import build_from_ref
from gymverse.protocol import EnvLike

EntryKind = Literal["builtin", "artifact", "file", "gem"]


class SuiteError(ValueError):
    """The suite spec names nothing that can be evaluated."""


@dataclass
class EnvEntry:
    """One environment of a suite, described without running its code."""

    name: str
    kind: EntryKind
    #: What `build_env` takes: a registered id, ``file:/abs/env.py`` or ``gem:/abs/env.py``.
    ref: str
    domain: str = "other"
    description: str = ""
    #: Program text (for structural and embedding diversity); empty when unavailable.
    source: str = ""
    #: The abstraction spec (artifacts' ``spec.json``) when there is one.
    spec: dict[str, Any] | None = None
    #: Why the entry cannot be evaluated at all (missing env.py, unreadable spec); None when it can.
    load_error: str | None = None


@dataclass
class Suite:
    """A named list of entries, plus one-line notes on the files that were skipped (not envs)."""

    name: str
    entries: list[EnvEntry]
    skipped: list[str] = field(default_factory=list)

    def names(self) -> list[str]:
        """Entry names in order."""
        return [e.name for e in self.entries]


def build_env(ref: str, level: int, seed: int | None = None) -> EnvLike:
    """Build the env behind an entry `ref` at complexity `level` (`gymverse.loader.build_from_ref`)."""
    return build_from_ref(ref, level, seed)


MAX_SHIPPED_BYTES = 4 * 1024 * 1024


def _split_ref(ref: str) -> tuple[str, Path, str]:
    """``(kind, file path, tail)`` of a file ref: ``gem:/a/env.py:Cls|rule`` gives the path and ``:Cls|rule``."""
    kind, _, path_text = ref.partition(":")
    tail = ""
    if kind == "gem":
        from gymverse.loader import split_spec

        body, bar, rule = path_text.partition("|")
        path_text, class_name = split_spec(body)
        tail = (f":{class_name}" if class_name else "") + (f"|{rule}" if bar else "")
    return kind, Path(path_text), tail


def job_files(entry: EnvEntry) -> tuple[str, dict[str, str]]:
    """The ref a sandboxed job should use plus the files to place in its working directory.

    Sandboxed jobs cannot read the caller's folders, so an artifact's ``*.py``/``*.json`` files (or the single
    env file) travel with the job and the ref becomes relative (``file:env.py``).
    """
    if entry.kind == "builtin":
        return entry.ref, {}
    kind, path, tail = _split_ref(entry.ref)
    sources = [path] if entry.kind != "artifact" else sorted(
        p for p in path.parent.iterdir() if p.is_file() and p.suffix in (".py", ".json")
    )  # fmt: skip
    files: dict[str, str] = {}
    total = 0
    for src in sources:
        text, error = _read(src)
        total += len(text)
        if error is None and total <= MAX_SHIPPED_BYTES:
            files[src.name] = text
    return f"{kind}:{path.name}{tail}", files


def user_paths(entry: EnvEntry, text: str) -> str:
    """`text` with the shipped copies of the entry's files (``env.py``, ``/tmp/job-x/env.py``) named by their real path.

    Sandboxed jobs see the files under their bare names in a temporary directory; a reason the user reads must
    point at the file they can open.
    """
    if entry.kind == "builtin" or not text:
        return text
    path = _split_ref(entry.ref)[1]
    try:
        names = [p.name for p in path.parent.iterdir() if p.suffix == ".py"] if entry.kind == "artifact" else []
    except OSError:
        names = []
    names.append(path.name)
    for name in sorted(set(names) & set(re.findall(r"[\w.-]+\.py", text)), key=len, reverse=True):
        real = str(path.parent / name).replace("\\", "\\\\")  # a replacement template: escape backslashes
        text = re.sub(rf"(?<![\w.-])(?:[^\s'\"():]*/)?{re.escape(name)}(?![\w.-])", real, text)
    return text


# ----------------------------------------------------------------------------------------------- static description
def _literal_kwargs(call: ast.Call) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            continue
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue
    return out


def describe_source(source: str) -> dict[str, Any]:
    """Name, domain and description read from a program's AST (``EnvMetadata(...)`` literals, docstrings)."""
    info: dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return info
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "EnvMetadata":
            kwargs = _literal_kwargs(node)
            for key in ("name", "domain", "description"):
                if isinstance(kwargs.get(key), str):
                    info.setdefault(key, kwargs[key])
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if classes:
        info.setdefault("name", classes[-1].name)
        doc = ast.get_docstring(classes[-1])
        if doc:
            info.setdefault("description", doc.strip().splitlines()[0])
    module_doc = ast.get_docstring(tree)
    if module_doc:
        info.setdefault("description", module_doc.strip().splitlines()[0])
    return info


def _is_gem_source(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:  # still recognisable, so the entry can say why it does not parse
        return re.search(r"^\s*(from\s+gem[\s.]|import\s+gem\b)", source, flags=re.M) is not None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gem":
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "gem" for a in node.names):
            return True
    return False


def _read(path: Path) -> tuple[str, str | None]:
    try:
        return path.read_text(encoding="utf-8"), None
    except (OSError, UnicodeDecodeError) as err:
        return "", f"{path}: cannot read: {err}"


@dataclass(frozen=True)
class FileOptions:
    """How `.py` env files are read: which class(es) and which success rule (GEM files)."""

    class_name: str | None = None
    all_classes: bool = False
    success_rule: str | None = None


def _env_classes(source: str) -> list[str] | None:
    """Env classes of a file (static), [] when it has none, None when it cannot be parsed."""
    from gymverse.compat.gem_conventions import class_names_in_source

    try:
        names = class_names_in_source(source)
        tree = ast.parse(source)
    except SyntaxError:
        return None
    gymverse_style = [
        n.name for n in tree.body if isinstance(n, ast.ClassDef)
        and {"_reset", "_step"} <= {f.name for f in n.body if isinstance(f, ast.FunctionDef)}
    ]  # fmt: skip
    return list(dict.fromkeys(names + gymverse_style))


def file_entries(path: Path, options: FileOptions | None = None) -> tuple[list[EnvEntry], str | None]:
    """Entries for one ``.py`` file (GEM style when it imports ``gem``), or none and a note saying why it is skipped."""
    from gymverse.compat.gem_conventions import source_problem

    opts = options or FileOptions()
    path = path.resolve()
    source, error = _read(path)
    kind: EntryKind = "gem" if _is_gem_source(source) else "file"
    info = describe_source(source)
    problem = error or (source_problem(source) if source else None)
    classes = _env_classes(source) if problem is None else None
    if classes == []:
        return [], f"skipped {path.name}: not an environment (no class with reset() and step())"
    rule = f"|{opts.success_rule}" if kind == "gem" and opts.success_rule else ""
    picks: list[str | None] = [None]
    if classes and kind == "gem":
        if opts.all_classes:
            picks = [None, *classes[1:]] if len(classes) > 1 else [None]
        elif opts.class_name in classes:
            picks = [opts.class_name]
    entries = []
    for cls in picks:
        entries.append(
            EnvEntry(
                name=f"{kind}:{path.stem}" + (f":{cls}" if cls else ""),
                kind=kind,
                ref=f"{kind}:{path}" + (f":{cls}" if cls else "") + rule,
                domain=str(info.get("domain", "other")),
                description=str(info.get("description", "")),
                source=source,
                load_error=f"{path}: {problem}" if problem else None,
            )
        )
    return entries, None


def file_entry(path: Path) -> EnvEntry:
    """The entry for one ``.py`` env file (its base env class); a file with no env class still gets an entry."""
    entries, note = file_entries(path)
    if entries:
        return entries[0]
    path = path.resolve()
    return EnvEntry(f"file:{path.stem}", "file", f"file:{path}", load_error=note)


def artifact_entry(directory: Path) -> EnvEntry:
    """An entry for a synthesized artifact directory (``env.py`` + ``spec.json``); missing files become errors."""
    directory = directory.resolve()
    env_py, spec_json = directory / "env.py", directory / "spec.json"
    errors: list[str] = []
    spec: dict[str, Any] | None = None
    if spec_json.is_file():
        try:
            loaded = json.loads(spec_json.read_text(encoding="utf-8"))
            spec = loaded if isinstance(loaded, dict) else None
            if spec is None:
                errors.append(f"{spec_json}: expected a JSON object, got {type(loaded).__name__}")
        except (OSError, ValueError) as err:
            errors.append(f"{spec_json}: unreadable: {err}")
    source = ""
    if env_py.is_file():
        source, read_error = _read(env_py)
        if read_error:
            errors.append(read_error)
    else:
        errors.append(f"{directory}: no env.py")
    info = describe_source(source)
    spec = spec or {}
    description = str(spec.get("goal") or spec.get("description") or info.get("description", ""))
    domain = str(spec.get("domain") or info.get("domain", "other"))
    return EnvEntry(
        name=f"synth:{spec.get('name') or directory.name}",
        kind="artifact",
        ref=f"file:{env_py}",
        domain=domain,
        description=description,
        source=source,
        spec=spec or None,
        # a missing spec.json is tolerated (no rubric judge); a missing env.py is not
        load_error="; ".join(e for e in errors if "env.py" in e) or None,
    )


def builtin_entries(family: str | None = None, *, shipped_only: bool = False) -> list[EnvEntry]:
    """Entries for the registered envs (of one family when given; only GymVerse's own with `shipped_only`)."""
    from gymverse import registry

    entries = []
    shipped = set(registry.builtin_ids()) if shipped_only else None
    for env_id in registry.list_envs(family):
        if shipped is not None and env_id not in shipped:
            continue
        entry = EnvEntry(name=env_id, kind="builtin", ref=env_id)
        try:
            factory = registry.spec(env_id).load()
            cls = factory if isinstance(factory, type) else None
            if cls is not None and issubclass(cls, Env):
                entry.domain = cls.metadata.domain
                entry.description = cls.metadata.description
                module = inspect.getmodule(cls)
                entry.source = inspect.getsource(module) if module else ""
        except Exception as err:  # a broken plugin is reported by the evaluation, not here
            entry.load_error = f"{env_id}: cannot load: {type(err).__name__}: {err}"
        entries.append(entry)
    return entries


def _unreadable(path: Path, why: str) -> EnvEntry:
    path = path.resolve()
    return EnvEntry(f"file:{path.stem}", "file", f"file:{path}", load_error=why)


def _files(paths: list[Path], opts: FileOptions, skipped: list[str]) -> list[EnvEntry]:
    out: list[EnvEntry] = []
    for p in paths:
        try:
            entries, note = file_entries(p, opts)
        except (RecursionError, MemoryError, ValueError) as err:  # one file that defeats the reader is its own error
            entries, note = [_unreadable(p, f"{p}: cannot be read as an env file: {type(err).__name__}")], None
        out += entries
        if note:
            skipped.append(note)
    return out


def _dir_entries(directory: Path, opts: FileOptions, skipped: list[str]) -> list[EnvEntry]:
    if (directory / "env.py").is_file() or (directory / "spec.json").is_file():
        return [artifact_entry(directory)]
    subdirs = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    artifacts = [artifact_entry(d) for d in subdirs if (d / "env.py").exists() or (d / "spec.json").exists()]
    files = [p for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")]
    return artifacts + _files(files, opts, skipped)


def _one(spec: str, opts: FileOptions, skipped: list[str]) -> tuple[str, list[EnvEntry]]:
    from gymverse import registry

    if spec in ("", "builtin", "builtins"):
        return "builtin", builtin_entries(shipped_only=True)
    if spec == "all":
        return "all", builtin_entries()
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.name, _dir_entries(path, opts, skipped)
    if path.is_file() and path.suffix == ".py":
        return path.stem, _files([path], opts, skipped)
    if path.suffix == ".py" or "/" in spec:
        raise SuiteError(f"{spec}: no such file or directory")
    families = sorted({i.split(":", 1)[0] for i in registry.list_envs()})
    if spec in families:
        return spec, builtin_entries(spec)
    known = registry.list_envs()
    if spec in known:
        return spec, [e for e in builtin_entries(spec.split(":", 1)[0]) if e.name == spec]
    hint = registry.did_you_mean(spec, known if ":" in spec else families)
    raise SuiteError(
        f"unknown suite {spec!r}{hint} (expected 'builtin', a family ({', '.join(families)}), a registered id, "
        "an artifact directory, or a .py env file / directory of them)"
    )


def load_suite(spec: str | Path | None = None, options: FileOptions | None = None) -> Suite:
    """Resolve a suite spec (see the module docstring) into entries; raises `SuiteError` when it names nothing."""
    parts = [p.strip() for p in str(spec or "builtin").split(",") if p.strip()] or ["builtin"]
    opts = options or FileOptions()
    names: list[str] = []
    entries: list[EnvEntry] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for part in parts:
        name, found = _one(part, opts, skipped)
        names.append(name)
        for entry in found:
            if entry.name in seen:  # two files with one stem: keep both, distinguishable
                entry.name = f"{entry.name}#{len(entries)}"
            seen.add(entry.name)
            entries.append(entry)
    if not entries:
        why = f" ({'; '.join(skipped)})" if skipped else ""
        raise SuiteError(f"suite {spec!r} contains no environments{why}")
    return Suite("+".join(names), entries, skipped)


__all__ = [
    "EnvEntry",
    "FileOptions",
    "Suite",
    "SuiteError",
    "artifact_entry",
    "build_env",
    "describe_source",
    "file_entries",
    "file_entry",
    "job_files",
    "load_suite",
]
