"""An evaluated suite as a training suite: ``manifest.json`` lists the envs that passed evaluation, by reference.

`gymverse evaluate` writes it next to ``evaluation.json`` (envs whose verdict is ``correct`` or ``unverified`` and
that were not flagged ``unsafe``). Each env is a *reference* that builds it anywhere, in any process:
``gem:/abs/path.py[:Class][|rule]`` (a GEM-style file), ``file:/abs/path.py[:Class]`` (a GymVerse env file) or a
registered id. The registry resolves a file reference itself (`gymverse.registry.spec`) only when its file is
allowed: listed in ``GYMVERSE_ENV_FILES`` (paths or folders, ``os.pathsep``-separated), which `read_manifest` extends
with the files it lists, so this process and the pool workers and adapter processes it starts build them as they
build built-ins, while a process that read no manifest (e.g. ``gymverse serve``) never runs a file a client names.
`expand_env_ids` turns a manifest path among env ids into its refs, which is how `make_vec`, ``gymverse train
--envs`` and every adapter's ``make-dataset --envs`` accept it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

FORMAT = "gymverse-manifest"
VERSION = 1
MANIFEST_NAME = "manifest.json"
FILE_PREFIXES = ("gem:", "file:")
PASSING = ("correct", "unverified")
#: The env files (or folders of them) this process and its children may build by reference.
ALLOW_VAR = "GYMVERSE_ENV_FILES"


class ManifestError(ValueError):
    """A manifest that cannot be read: the message names the file and the problem."""


def split_ref(ref: str) -> tuple[str, str, str, str]:
    """``(prefix, path, ":Class" or "", "|rule" or "")`` of a file reference."""
    from gymverse.imports import split_spec

    prefix = next(p for p in FILE_PREFIXES if ref.startswith(p))
    body, bar, rule = ref.removeprefix(prefix).partition("|")
    where, cls = split_spec(body)
    return prefix, where, f":{cls}" if cls else "", f"{bar}{rule}"


def is_file_ref(env_id: str) -> bool:
    """True for ``gem:...py`` / ``file:...py`` references (a path, not a registered id)."""
    if not env_id.startswith(FILE_PREFIXES):
        return False
    return split_ref(env_id)[1].endswith(".py")


def absolute_ref(ref: str, base: str | Path = ".") -> str:
    """`ref` with its file path made absolute against `base` (registered ids unchanged)."""
    if not is_file_ref(ref):
        return ref
    prefix, where, cls, rule = split_ref(ref)
    return f"{prefix}{(Path(base) / where).resolve()}{cls}{rule}"


def allowed_file(ref: str) -> bool:
    """True when the file a reference names is listed (itself or a folder above it) in ``GYMVERSE_ENV_FILES``."""
    path = Path(split_ref(ref)[1]).resolve()
    for entry in os.environ.get(ALLOW_VAR, "").split(os.pathsep):
        if entry and (path == Path(entry).resolve() or Path(entry).resolve() in path.parents):
            return True
    return False


def allow_files(refs: Iterable[str]) -> None:
    """Allow the files of `refs` in this process and the processes it starts (``GYMVERSE_ENV_FILES``)."""
    have = [e for e in os.environ.get(ALLOW_VAR, "").split(os.pathsep) if e]
    new = [str(Path(split_ref(r)[1]).resolve()) for r in refs if is_file_ref(r)]
    os.environ[ALLOW_VAR] = os.pathsep.join(dict.fromkeys([*have, *new]))


def manifest_entries(envs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The passing envs among evaluation entries (``name``, ``ref``, ``verdict``, ``flags``)."""
    out = []
    for e in envs:
        if e.get("verdict") in PASSING and "unsafe" not in (e.get("flags") or []):
            out.append({"name": str(e["name"]), "ref": absolute_ref(str(e["ref"])), "verdict": e["verdict"],
                        "warnings": [f for f in e.get("warnings") or []]})  # fmt: skip
    return out


def write_manifest(path: str | Path, suite: str, envs: Iterable[Mapping[str, Any]]) -> Path:
    """Write the manifest of the passing `envs` to `path`."""
    p = Path(path)
    doc = {"format": FORMAT, "version": VERSION, "suite": suite, "envs": manifest_entries(envs)}
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return p


def read_manifest(path: str | Path) -> list[str]:
    """The env references a manifest lists, in order (relative file paths resolved against its folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST_NAME
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ManifestError(f"{p}: cannot read the manifest: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ManifestError(f'{p}: not a GymVerse manifest (no "format": "{FORMAT}")')
    if doc.get("version") != VERSION:
        raise ManifestError(f"{p}: manifest version {doc.get('version')!r} is not {VERSION}")
    envs = doc.get("envs")
    if not isinstance(envs, list) or not all(isinstance(e, dict) and isinstance(e.get("ref"), str) for e in envs):
        raise ManifestError(f'{p}: "envs" must be a list of objects with a "ref"')
    if not envs:
        raise ManifestError(f"{p}: no env passed evaluation, so there is nothing to train on")
    refs = [absolute_ref(e["ref"], p.parent) for e in envs]
    allow_files(refs)  # what passed evaluation may be built here and in the workers started from here
    return refs


def is_manifest_path(item: str) -> bool:
    """True when an item given among env ids names a manifest file (or a folder holding one)."""
    p = Path(item)
    return (item.endswith(".json") and p.is_file()) or (p.is_dir() and (p / MANIFEST_NAME).is_file())


def expand_env_ids(items: Sequence[str]) -> list[str]:
    """`items` with every manifest path replaced by the references it lists."""
    out: list[str] = []
    for item in items:
        out += read_manifest(item) if is_manifest_path(item) else [item]
    return out


__all__ = [
    "ALLOW_VAR",
    "MANIFEST_NAME",
    "ManifestError",
    "absolute_ref",
    "allow_files",
    "allowed_file",
    "expand_env_ids",
    "is_file_ref",
    "is_manifest_path",
    "read_manifest",
    "write_manifest",
]
