"""``gymverse check --path FILE`` runs the file in the sandbox by default, with timeouts (attacks, not politeness)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gymverse.checker.sandboxed import check_in_sandbox

# the GEM-style fixture files live with the GEM compatibility tests
GOOD = Path(__file__).parents[2] / "gymverse-gem" / "tests" / "gem_fixtures" / "gem_higher_lower.py"

WRITER = """
import os
from gymverse.core import Env, EnvMetadata, StepResult

TARGET = {target!r}
try:  # at import time, as the caller would run it
    with open(TARGET, "w") as f:
        f.write("written by the env file")
except OSError:
    pass


class Writer(Env):
    metadata = EnvMetadata(name="Writer", family="test", domain="game", description="writes files", max_turns=2)

    def _reset(self):
        return "say anything", {{}}

    def _step(self, action):
        return StepResult("done", 1.0, True, False, {{"success": True}})

    def solve(self):
        return "x"
"""

HANGS = """
from gymverse.core import Env, EnvMetadata, StepResult


class Spins(Env):
    metadata = EnvMetadata(name="Spins", family="test", domain="game", description="never resets", max_turns=2)

    def _reset(self):
        while True:
            try:
                pass
            except Exception:  # swallowing exceptions must not save it from the deadline
                continue

    def _step(self, action):
        return StepResult("done", 0.0, True, False, {"success": False})

    def solve(self):
        return "x"
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gymverse.cli", *args], capture_output=True, text=True, timeout=300)


def test_an_env_file_cannot_write_the_callers_files_by_default(tmp_path: Path) -> None:
    target = tmp_path / "owned.txt"
    env_file = tmp_path / "writer.py"
    env_file.write_text(WRITER.format(target=str(target)))
    res = _cli("check", "--path", str(env_file), "--levels", "1", "--seeds", "0")
    assert not target.exists(), res.stdout
    assert "Writer" in res.stdout or "writer.py" in res.stdout
    # the same command without the sandbox runs the file as the caller: the attack works there
    _cli("check", "--path", str(env_file), "--levels", "1", "--seeds", "0", "--no-sandbox")
    assert target.read_text() == "written by the env file"


def test_a_reset_that_never_returns_is_reported_with_level_and_seed_in_bounded_time(tmp_path: Path) -> None:
    env_file = tmp_path / "spins.py"
    env_file.write_text(HANGS)
    start = time.monotonic()
    out = tmp_path / "check.json"
    res = _cli("check", "--path", str(env_file), "--levels", "3", "--seeds", "5", "--check-timeout", "1", "--json",
               str(out))  # fmt: skip
    assert time.monotonic() - start < 60
    assert res.returncode == 1, res.stderr
    (report,) = json.loads(out.read_text())["reports"]
    assert report["target"] == str(env_file)
    reasons = [r["reason"] for r in report["results"] if not r["passed"]]
    assert reasons == [
        "the env hung in the check after construct (level=3 seed=5): "
        "the env did not answer reset(seed=5) within 1s (its host was stopped)"
    ]


def test_a_gem_file_is_checked_in_the_sandbox_with_its_conventions() -> None:
    report = check_in_sandbox(str(GOOD), levels=(1,), seeds=(0,), check_timeout=20)
    assert report.meta.get("env_class", "").endswith("GemEnvAdapter")
    assert report.by_name("reset") and all(r.passed for r in report.by_name("reset"))
    assert report.meta["sandbox"], "the job must report the isolation it ran under"


@pytest.mark.parametrize("status", ["timeout"])
def test_the_sandbox_limit_is_the_backstop(tmp_path: Path, status: str) -> None:
    env_file = tmp_path / "spins.py"
    env_file.write_text(HANGS)
    report = check_in_sandbox(str(env_file), levels=(1,), seeds=(0,), check_timeout=30, timeout=2)
    assert not report.passed
    assert report.results[0].name == "sandbox" and status in report.results[0].reason


FORGER = """
import json

import gymverse.checker.checks as checks
from gymverse.core import Env, EnvMetadata, StepResult

# rewrite the checker and print a passing report: both stay inside the sandboxed host
checks.check_oracle = lambda *args, **kwargs: (True, "")
print(json.dumps({"target": "forger.py", "passed": True, "meta": {}, "results": []}))


class Forger(Env):
    metadata = EnvMetadata(name="Forger", family="test", domain="game", description="lies", max_turns=2)
    complexity_params = {"n": (1, 10)}

    def _reset(self):
        self.n = self.params["n"]
        return f"say {self.n}", {}

    def _step(self, action):
        won = action == str(self.n)
        return StepResult("done", 1.0 if won else 0.0, True, False, {"success": won})

    def solve(self):
        return "wrong"
"""


def test_an_env_file_cannot_forge_the_checkers_verdict(tmp_path: Path) -> None:
    env_file = tmp_path / "forger.py"
    env_file.write_text(FORGER)
    report = check_in_sandbox(str(env_file), levels=(1, 10), seeds=(0,), check_timeout=20)
    assert not report.passed
    oracle = report.by_name("oracle")
    assert oracle and not any(r.passed for r in oracle) and "oracle did not succeed" in oracle[0].reason
