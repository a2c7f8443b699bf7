"""What the env host preloads and may record comes from entry points the packages above register; the sandbox's
own source names none of them, and a host runs no check that is not registered."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from gymverse.imports import import_object
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox.host_registrations import BASE_PRELOAD, host_preload, recordable_checks
from gymverse.sandbox.hosted import EnvCallError, EnvHost

SRC = Path(__file__).resolve().parent.parent / "src" / "gymverse" / "sandbox"
#: Distributions above the sandbox (it depends on gymverse-core only).
HIGHER = re.compile(r"gymverse\.(checker|compat|envs|tools|server|viewer|vector)\b|gymverse_\w+")


def test_the_registered_modules_and_checks_are_found() -> None:
    preload = host_preload()
    assert preload[: len(BASE_PRELOAD)] == BASE_PRELOAD
    assert {"gymverse.checker", "gymverse.compat.gem_files"} <= set(preload)  # gymverse-eval's, gymverse-gem's
    checks = dict(recordable_checks())
    assert set(checks) == {"malformed", "state_checks"}
    assert all(callable(import_object(target)) for target in checks.values())


def names_in_code(path: Path) -> set[str]:
    """Modules `path` imports and the strings its code holds (docstrings, which may cite a package, left out)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            out.add(node.value)
    return out


def test_the_sandbox_source_names_no_higher_package() -> None:
    named = {f"{p.name}: {n}" for p in SRC.glob("*.py") for n in names_in_code(p) if HIGHER.search(n)}
    assert not named
    assert "gymverse.sandbox.env_host:serve" in names_in_code(SRC / "_host_connection.py")  # the scan sees code strings


def test_a_host_records_registered_checks_only() -> None:
    with EnvHost("gymverse.loader:build_from_ref", ["game:GuessTheNumber"], limits=SandboxLimits(timeout=60),
                 forked=True) as host:  # fmt: skip
        env = host.make(1)
        record = env.recorded("state_checks", 0, 20)
        assert record["calls"] and record["error"] is None
        with pytest.raises(EnvCallError, match="not a recordable check: 'os:system'") as err:
            env.recorded("os:system", 0, 1)
        assert isinstance(err.value, ValueError)
