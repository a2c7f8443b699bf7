"""Synthesis artifacts on disk: atomic writes, the artifact directory of an accepted env, the suite index, and
`register_suite`, which makes a suite's accepted envs loadable with ``gymverse.make("family:Name")``.

An artifact directory (DESIGN.md) holds ``spec.json`` (the abstraction), ``env.py`` (the program),
``validation.json``, ``provenance.json`` (model, prompts, seed idea, repair rounds, tokens, timings) and, once the
evaluator ran, ``evaluation.json``. A suite is a folder of them plus ``index.json`` listing every seed's outcome,
accepted or rejected with its reason.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

INDEX = "index.json"
INDEX_VERSION = 1
_INDEX_LOCK = threading.Lock()


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a temp file + rename, so a reader never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | Path, data: Any) -> Path:
    """`atomic_write_text` of pretty JSON."""
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    """Parse a JSON file, naming the file in the error."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON: {err}") from err


def write_artifact(
    directory: str | Path,
    *,
    spec: Mapping[str, Any],
    program: str,
    validation: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Write one accepted env's artifact directory (spec.json, env.py, validation.json, provenance.json)."""
    directory = Path(directory)
    atomic_write_text(directory / "env.py", program)
    atomic_write_json(directory / "spec.json", dict(spec))
    atomic_write_json(directory / "validation.json", dict(validation))
    atomic_write_json(directory / "provenance.json", dict(provenance))
    return directory


def load_index(suite_dir: str | Path) -> dict[str, Any]:
    """The suite's ``index.json`` (an empty index when there is none yet)."""
    path = Path(suite_dir) / INDEX
    if not path.is_file():
        return {"version": INDEX_VERSION, "envs": {}}
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("envs"), dict):
        raise ValueError(f"{path}: expected {{'version': ..., 'envs': {{...}}}}")
    return data


def update_index(suite_dir: str | Path, key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Set ``envs[key] = entry`` in the suite index (read-modify-write under a lock, written atomically)."""
    with _INDEX_LOCK:
        index = load_index(suite_dir)
        index["envs"][key] = dict(entry)
        atomic_write_json(Path(suite_dir) / INDEX, index)
    return index


def unique_name(suite_dir: str | Path, name: str, owner: str) -> str:
    """`name`, or `name_2`, `name_3`, ... when another seed (`owner`) already holds that artifact name."""
    index = load_index(suite_dir)
    taken = {e.get("artifact"): k for k, e in index["envs"].items() if e.get("artifact")}
    candidate, k = name, 1
    while candidate in taken and taken[candidate] != owner:
        k += 1
        candidate = f"{name}_{k}"
    return candidate


def accepted_entries(suite_dir: str | Path) -> list[dict[str, Any]]:
    """Index entries of the accepted envs, sorted by artifact name."""
    envs = load_index(suite_dir)["envs"].values()
    return sorted((dict(e) for e in envs if e.get("status") == "accepted"), key=lambda e: str(e["artifact"]))


def _lazy_factory(env_file: Path) -> Any:
    """A registry factory that loads the class from `env_file` on first use (registering stays cheap)."""
    from gymverse.core import Env

    cache: dict[str, type[Env]] = {}

    def factory(**kwargs: Any) -> Env:
        if "cls" not in cache:
            from gymverse.loader import load_env_class

            # validation guarantees exactly one Env class per program, whatever the model named it
            cache["cls"] = load_env_class(str(env_file))
        return cache["cls"](**kwargs)

    factory.__qualname__ = f"synth_factory[{env_file.parent.name}]"
    return factory


def register_suite(suite_dir: str | Path, family: str = "synth", *, override: bool = True) -> list[str]:
    """Register every accepted env of the suite as ``family:<artifact name>``; returns the ids.

    The program is loaded (in this process: only do this for validated envs) the first time the id is made.
    """
    from gymverse.registry import register

    suite = Path(suite_dir).resolve()
    ids = []
    for entry in accepted_entries(suite):
        env_file = suite / str(entry["artifact"]) / "env.py"
        if not env_file.is_file():
            raise FileNotFoundError(f"{env_file}: listed as accepted in {suite / INDEX} but missing")
        env_id = f"{family}:{entry['artifact']}"
        register(env_id, _lazy_factory(env_file), override=override)
        ids.append(env_id)
    return ids


__all__ = [
    "INDEX",
    "accepted_entries",
    "atomic_write_json",
    "atomic_write_text",
    "load_index",
    "read_json",
    "register_suite",
    "unique_name",
    "update_index",
    "write_artifact",
]
