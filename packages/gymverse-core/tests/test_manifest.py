"""Env files by reference: built only where a manifest (or the operator) allowed them, never on a client's word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gymverse import registry
from gymverse.manifest import ALLOW_VAR, allow_files, expand_env_ids, write_manifest

ENV = """
from gem.core import Env


class TinyEnv(Env):
    def reset(self, seed=None):
        super().reset(seed)
        return "Say \\\\boxed{hi}.", {}

    def step(self, action):
        ok = "hi" in action
        return "Done.", 1.0 if ok else -1.0, True, False, {}

    def sample_random_action(self):
        return "\\\\boxed{hi}"
"""


def test_a_file_reference_nobody_allowed_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_VAR, raising=False)
    (tmp_path / "tiny.py").write_text(ENV)
    ref = f"gem:{tmp_path / 'tiny.py'}"
    # what a client of `gymverse serve` (which reads no manifest) could name: refused, the file never runs
    with pytest.raises(registry.RegistryError, match="not allowed in this process"):
        registry.spec(ref)
    with pytest.raises(ValueError, match="unknown env id"):
        registry.check_env_ids([ref])
    (tmp_path / "twin").mkdir()
    monkeypatch.setenv(ALLOW_VAR, str(tmp_path / "tw"))  # a prefix of a name is not a folder above it
    with pytest.raises(registry.RegistryError):
        registry.spec(f"gem:{tmp_path / 'twin' / 'tiny.py'}")


def test_a_manifest_allows_its_files_here_and_they_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_VAR, raising=False)
    (tmp_path / "tiny.py").write_text(ENV)
    rows = [{"name": "gem:tiny", "ref": "gem:tiny.py", "verdict": "correct"}]
    monkeypatch.chdir(tmp_path)
    path = write_manifest(tmp_path / "out" / "manifest.json", "s", rows)
    [ref] = expand_env_ids(["game:GuessTheNumber", str(path)])[1:]
    assert ref == f"gem:{tmp_path / 'tiny.py'}"  # absolute: it builds from any working directory
    env = registry.make(ref, complexity=2)
    assert env.reset(seed=0)[0] == "Say \\boxed{hi}."
    allow_files([ref])  # idempotent
    assert os.environ[ALLOW_VAR].split(os.pathsep).count(str(tmp_path / "tiny.py")) == 1
