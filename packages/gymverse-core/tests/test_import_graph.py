"""The workspace import contract (.ci/import_graph.py): holds on this checkout, and catches what it is for."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / ".ci" / "import_graph.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _package(root: Path, name: str, deps: list[str], files: dict[str, str]) -> None:
    pkg = root / "packages" / name
    (pkg / "src").mkdir(parents=True)
    quoted = ", ".join(f'"{d}"' for d in deps)
    (pkg / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0"\ndependencies = [{quoted}]\n')
    for rel, text in files.items():
        path = pkg / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_contract_holds_on_this_checkout(tmp_path: Path) -> None:
    dot = tmp_path / "packages.dot"
    proc = _run("--dot", str(dot))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "import contract: OK" in proc.stdout
    assert '"gymverse-synth" -> "gymverse-core";' in dot.read_text()


def test_planted_cycle_upward_and_private_imports_fail(tmp_path: Path) -> None:
    # low <- high: `low` importing `high` is an upward arrow; a function-local and a TYPE_CHECKING import close a
    # cycle; `high` reaching into `low.inner._impl` is a foreign private import.
    _package(
        tmp_path,
        "low",
        ["numpy"],
        {
            "low/__init__.py": "",
            "low/a.py": "def f() -> None:\n    from low import b  # hidden in a function\n",
            "low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from low.a import f\n",
            "low/up.py": "import high.api\n",
            "low/inner/__init__.py": "from . import _impl\n",
            "low/inner/_impl.py": "import numpy\n",
        },
    )
    _package(
        tmp_path,
        "high",
        ["low"],
        {"high/__init__.py": "", "high/api.py": "from low.inner._impl import numpy\nimport low.up\n"},
    )
    proc = _run("--root", str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "import cycle: low.a -> low.b -> low.a" in out
    assert "low.b -> low.a  (packages/low/src/low/b.py:3, type-only)" in out
    assert "import cycle: high.api -> low.up -> high.api" in out
    assert "undeclared (upward?) import: low.up -> high.api  (packages/low/src/low/up.py:1): low does not depend" in out
    assert "private import: high.api -> low.inner._impl" in out
    # the package's own relative import of its private module is fine, and so is a declared third-party import
    assert "low.inner -> low.inner._impl" not in out
    assert "-> numpy" not in out
    assert "  high -> low\n  low -> high\n" in out


def test_undeclared_third_party_import_fails(tmp_path: Path) -> None:
    _package(tmp_path, "solo", [], {"solo/__init__.py": "import json\nimport numpy\n"})
    proc = _run("--root", str(tmp_path))
    assert proc.returncode == 1
    assert "undeclared import: solo -> numpy  (packages/solo/src/solo/__init__.py:2)" in proc.stdout
    assert "-> json" not in proc.stdout


def test_stale_allowlist_entry_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "import_graph", module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    _package(tmp_path, "solo", [], {"solo/__init__.py": "", "solo/a.py": "from solo import b\n", "solo/b.py": ""})
    monkeypatch.setattr(module, "ALLOWLIST", frozenset({"solo.a -> solo.b", "solo.b -> solo.a"}))
    problems, _ = module.check(tmp_path)
    assert problems == ["stale allowlist entry (the import is gone: delete it from ALLOWLIST): solo.b -> solo.a"]
