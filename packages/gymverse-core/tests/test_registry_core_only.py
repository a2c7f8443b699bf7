"""The core's registry works with no env package installed: built-ins are a plugin like any other (issue 36)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from gymverse import loader

# A fresh interpreter where the `gymverse.envs` entry-point group is empty and `gymverse.envs` cannot be imported:
# what a lab gets from `pip install gymverse-core` alone. A user env registered there must still be made.
CORE_ONLY = textwrap.dedent(
    """
    import importlib.abc, importlib.metadata, sys

    class NoBuiltins(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "gymverse.envs" or name.startswith("gymverse.envs."):
                raise ImportError(f"{name} is not installed")
            return None

    sys.meta_path.insert(0, NoBuiltins())
    real = importlib.metadata.entry_points
    importlib.metadata.entry_points = lambda **kw: [] if kw.get("group") == "gymverse.envs" else real(**kw)

    import gymverse
    from gymverse.core import StepResult

    class Echo(gymverse.Env):
        def _reset(self):
            return "say hi", {}
        def _step(self, action):
            return StepResult("ok", float(action == "hi"), True, False, {})
        def solve(self):
            return "hi"

    gymverse.register("mine:Echo", Echo)
    env = gymverse.make("mine:Echo")
    env.reset(seed=0)
    print("reward", env.step(env.solve()).reward, "ids", gymverse.list_envs())
    try:
        gymverse.make("game:Mastermind")
    except LookupError as err:
        print("unknown:", err)
    print("builtins imported:", "gymverse.envs" in sys.modules)
    """
)


def test_core_alone_makes_a_user_registered_env() -> None:
    proc = subprocess.run([sys.executable, "-c", CORE_ONLY], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "reward 1.0 ids ['mine:Echo']" in proc.stdout
    assert "unknown:" in proc.stdout and "game:Mastermind" in proc.stdout
    assert "builtins imported: False" in proc.stdout


def test_gem_refs_without_gymverse_gem_name_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.entry_points

    def no_ref_builders(**kw: Any) -> Any:
        return real(group="gymverse.no-such-group") if kw.get("group") == loader.REF_BUILDERS_GROUP else real(**kw)

    monkeypatch.setattr(importlib.metadata, "entry_points", no_ref_builders)
    loader._ref_builder.cache_clear()  # found once per process (a failure is not kept): look again here
    with pytest.raises(loader.EnvLoadError, match="'gem:' env files need the gymverse-gem package"):
        loader.build_from_ref("gem:/nowhere/env.py")
