"""Fail when a lock file or pyproject names something that exists only on one machine.

A lock is portable when every package comes from an http(s) index or URL, or from a relative path inside the
repository (the workspace members). Local wheel folders (``find-links = ["/opt/wheels"]``), ``file://`` indexes,
absolute paths and local version labels on index packages (``torch==2.13.0+cpu``: PyPI never serves one) all make
``uv sync --locked`` fail on a machine without that folder.

Usage: ``python .ci/check_portable.py [REPO_ROOT]`` — prints one line per problem, exit 1 if any, else 0.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

_REMOTE = re.compile(r"^https?://", re.IGNORECASE)
_LOCAL_VERSION = re.compile(r"==\s*[^,;\s]+\+[A-Za-z0-9.]+")


def _is_local(location: str, base: Path) -> bool:
    """True for an absolute path, a ``file://`` URL or a relative path (from `base`) leaving the repository."""
    if not location or _REMOTE.match(location):
        return False
    if location.startswith(("/", "~", "file:")):
        return True
    root = _repo_root(base)
    return not (base / location).resolve().is_relative_to(root)


def _repo_root(start: Path) -> Path:
    for parent in [start, *start.parents]:
        if (parent / ".git").exists():
            return parent.resolve()
    return start.resolve()


def lock_problems(lock: Path) -> Iterator[str]:
    """The machine-local sources recorded in one ``uv.lock``."""
    data = tomllib.loads(lock.read_text(encoding="utf-8"))
    for pkg in data.get("package", []):
        name = f"{pkg.get('name')}=={pkg.get('version')}"
        for kind, value in pkg.get("source", {}).items():
            if isinstance(value, str) and kind in ("registry", "url", "path", "directory", "editable", "virtual"):
                remote_kind = kind in ("registry", "url")
                if (not _REMOTE.match(value)) if remote_kind else _is_local(value, lock.parent.resolve()):
                    yield f"{lock}: {name} comes from a machine-local {kind} {value!r}"
        artifacts = [*pkg.get("wheels", []), *([pkg["sdist"]] if "sdist" in pkg else [])]
        for art in artifacts:
            where = art.get("path") or art.get("url") or ""
            if "path" in art or _is_local(where, lock.parent.resolve()):
                yield f"{lock}: {name} has a machine-local file {where!r}"
        if "+" in str(pkg.get("version", "")) and _REMOTE.match(str(pkg.get("source", {}).get("registry", ""))):
            yield f"{lock}: {name} has a local version label no public index serves"


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk_strings(v)


def pyproject_problems(pyproject: Path) -> Iterator[str]:
    """Machine-local find-links/indexes and local-version build pins in one ``pyproject.toml``."""
    uv = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("uv", {})
    for link in uv.get("find-links", []):
        if not _REMOTE.match(link):
            yield f"{pyproject}: [tool.uv] find-links names the machine-local {link!r}"
    for index in uv.get("index", []):
        url = str(index.get("url", ""))
        if not _REMOTE.match(url):
            yield f"{pyproject}: [[tool.uv.index]] {index.get('name', '')!r} is machine-local: {url!r}"
    for key in ("extra-build-dependencies", "dependency-metadata", "constraint-dependencies", "override-dependencies"):
        for text in _walk_strings(uv.get(key, {})):
            if _LOCAL_VERSION.search(text):
                yield f"{pyproject}: [tool.uv] {key} pins a local version no public index serves: {text!r}"


def problems(root: Path) -> list[str]:
    """Every portability problem under `root` (lock files and pyprojects, virtual environments skipped)."""
    found: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if any(part.startswith(".venv") or part in (".git", "node_modules") for part in rel):
            continue
        if path.name == "uv.lock":
            found += lock_problems(path)
        elif path.name == "pyproject.toml":
            found += pyproject_problems(path)
    return found


def main(argv: list[str]) -> int:
    """Print the problems under the repository root; exit 1 when there are any."""
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    found = problems(root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} machine-local source(s): the install works only on a machine that has them")
        return 1
    print(f"portable: no machine-local source in the locks and pyprojects under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
