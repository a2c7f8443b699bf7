"""Envs that attack the evaluator's logic around the sandbox (issue 32): its verdict code, its per-env state and its
report. Each one runs for real (sandboxed hosts, the `gymverse` command in a subprocess) and must change nothing but
its own verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gymverse.evaluate import CorrectnessConfig, DifficultyConfig, EvaluationConfig, evaluate_suite, load_suite
from gymverse.evaluate.correctness import HOST_FACTORY, check_hosted, verdict
from gymverse.sandbox.hosted import EnvCallError, EnvHost
from gymverse_synth.validation import ValidationConfig, validate_program

GOOD = (Path(__file__).parent / "synth_fixtures" / "good_env.py").read_text()
OBSERVATION = 'return f"Sort ascending: {self.items}. Answer with \\\\boxed{{swap i j}} (0-based positions).", {}'
GYMVERSE = str(Path(sys.executable).with_name("gymverse"))


def variant(name: str, **replace: str) -> str:
    """The good fixture env renamed to `name`, with each ``old=new`` text replacement applied (all must match)."""
    src = GOOD.replace("SortBySwaps", name)
    for old, new in replace.items():
        old = {"OBS": OBSERVATION, "IMPORTS": "from typing import Any\n"}.get(old, old)
        assert old in src, old
        src = src.replace(old, new)
    return src


#: Nondeterministic (a process-wide counter in the first observation) and its observation carries the text the
#: verdict code once read as "this failure is only a consequence": ``] skipped: ``.
INJECTED = variant(
    "Injected",
    IMPORTS="import itertools\nfrom typing import Any\n\nTICKS = itertools.count()\n",
    OBS=OBSERVATION.replace("positions).", "positions). ] skipped: {next(TICKS)}"),
)
#: A valid program whose 1,500-term constant expression defeats recursive AST functions (RecursionError).
DEEP = variant("Deep", IMPORTS="from typing import Any\n\nBIG = " + " + ".join(["1"] * 1500) + "\n")
#: Raises an exception of a new made-up type on every reset: floods any table of remote exception classes.
FLOOD = variant(
    "Flood",
    OBS='raise type(f"Made{self._seed}", (Exception,), {})("flood")\n        ' + OBSERVATION,
)
#: Honest, but without an oracle: its solve() raises NotImplementedError, so the env is `unverified`.
NO_ORACLE = variant(
    "NoOracle",
    **{"def solve(self) -> str:\n": 'def solve(self) -> str:\n        raise NotImplementedError("no oracle")\n'},
)

SMALL = CorrectnessConfig(
    checker_levels=(1, 10),
    checker_seeds=(0,),
    oracle_seeds=(0,),
    degeneracy_levels=(5,),
    degeneracy_seeds=(0, 1),
    reset_seeds=4,
    probe_levels=(1, 10),
    constant_levels=(5,),
    constant_seeds=2,
    call_timeout=5.0,
)


def evaluate_cli(suite: Path, out: Path) -> tuple[int, dict[str, Any], str]:
    """Run ``gymverse evaluate`` on `suite` in a subprocess: exit code, evaluation.json, printed output."""
    args = ["--levels", "1,10", "--seeds", "2", "--policy", "random,oracle", "--reset-seeds", "4"]
    args += ["--embedder", "hashing", "--workers", "2", "--out", str(out)]
    proc = subprocess.run([GYMVERSE, "evaluate", str(suite), *args], capture_output=True, text=True, timeout=300)
    data = json.loads((out / "evaluation.json").read_text()) if (out / "evaluation.json").exists() else {}
    return proc.returncode, data, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    suite = tmp_path_factory.mktemp("suite")
    for name, src in {"good": GOOD, "injected": INJECTED, "deep": DEEP}.items():
        (suite / f"{name}.py").write_text(src)
    return evaluate_cli(suite, tmp_path_factory.mktemp("out"))


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in data.get("envs", [])}


def test_injected_skip_text_cannot_hide_nondeterminism(cli_run: tuple[int, dict[str, Any], str]) -> None:
    code, data, printed = cli_run
    envs = by_name(data)
    injected = envs["file:injected"]["correctness"]
    assert injected["verdict"] == "incorrect", printed
    assert any(r.startswith("checker determinism:") for r in injected["reasons"]), injected["reasons"]
    assert code == 1, printed  # an incorrect env fails the run
    assert envs["file:good"]["correctness"]["verdict"] == "correct", envs["file:good"]["correctness"]["reasons"]


def test_check_command_still_fails_the_injected_env(tmp_path: Path) -> None:
    path = tmp_path / "injected.py"
    path.write_text(INJECTED)
    proc = subprocess.run([GYMVERSE, "check", str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    assert "determinism" in proc.stdout


def test_a_program_that_defeats_diversity_gets_a_finding_and_the_others_a_report(
    cli_run: tuple[int, dict[str, Any], str],
) -> None:
    _, data, printed = cli_run
    envs = by_name(data)
    assert set(envs) == {"file:good", "file:injected", "file:deep"}, printed
    assert "RecursionError" in data["diversity"]["env_errors"]["file:deep"]
    assert "diversity_error" in envs["file:deep"]["flags"]
    assert envs["file:deep"]["correctness"]["verdict"] == "correct"  # the program itself is fine
    assert data["diversity"]["structural"]["ast_ngram_distance"] is not None  # the other two were compared


def test_an_error_class_flood_does_not_change_another_envs_verdict(tmp_path: Path) -> None:
    flood = EnvHost(HOST_FACTORY, ["file:flood.py"], files={"flood.py": FLOOD}, call_timeout=10.0)
    try:
        env = flood.make(1)
        for seed in range(300):  # more distinct names than any one table may hold
            with pytest.raises(EnvCallError) as raised:
                env.reset(seed=seed)
            assert raised.value.remote_type == f"Made{seed}"
    finally:
        flood.close()
    plan = SMALL.job_kwargs("file:no_oracle.py")
    evidence = check_hosted(**plan, files={"no_oracle.py": NO_ORACLE}, call_timeout=10.0)
    result = verdict(evidence)
    assert result.verdict == "unverified", result.reasons
    host = EnvHost(HOST_FACTORY, ["file:no_oracle.py"], files={"no_oracle.py": NO_ORACLE}, call_timeout=10.0)
    try:
        honest = host.make(1)
        honest.reset(seed=0)
        with pytest.raises(NotImplementedError):  # still the builtin's subclass after the flood
            honest.solve()
    finally:
        host.close()


#: Ignores SIGALRM (the alarm its own process once got as an episode deadline), then loops in every step.
DEAF = variant(
    "Deaf",
    IMPORTS="import signal\nfrom typing import Any\n",
    **{
        "cmd = GRAMMAR.parse(action)": "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n        while True:\n"
        "            pass\n        cmd = GRAMMAR.parse(action)"
    },
)


def test_an_env_that_ignores_alarms_is_stopped_at_each_episode_deadline(tmp_path: Path) -> None:
    (tmp_path / "deaf.py").write_text(DEAF)
    cfg = EvaluationConfig(
        policies=("random",),
        difficulty=DifficultyConfig(levels=(1, 10), seeds=(0, 1, 2), ks=(1,), timeout=120.0),
        correctness=replace(SMALL, episode_timeout=1.0, reset_timeout=1.0, call_timeout=2.0, checker_timeout=10.0),
        executor="sandbox",
        workers=1,
        run_diversity=False,
    )
    report = evaluate_suite(load_suite(str(tmp_path)), cfg)
    (ev,) = report.envs
    assert ev.correctness.verdict == "incorrect"
    assert "hang" in ev.flags, ev.correctness.reasons
    random = ev.difficulty["random"]
    errors = random.error or ""
    # each level ends at its first episode's deadline, kept by the trusted side, not at the job's 120 s limit
    assert all(lv.first_error and "within 1s" in lv.first_error for lv in random.levels) or "within 1s" in errors, (
        random
    )
    assert "120" not in errors


RAISERS = {
    "UnicodeDecodeError": 'b"\\xff".decode("utf-8")',
    "ExceptionGroup": 'raise ExceptionGroup("several", [ValueError("a"), KeyError("b")])',
}


@pytest.mark.parametrize("kind", sorted(RAISERS))
def test_exceptions_with_their_own_constructor_are_reported_as_themselves(kind: str) -> None:
    if kind == "ExceptionGroup" and sys.version_info < (3, 11):
        pytest.skip("ExceptionGroup is a builtin from Python 3.11")
    source = variant("Raiser", OBS=RAISERS[kind] + "\n        " + OBSERVATION)
    report = validate_program(source, ValidationConfig(seeds=(0,), timeout=30.0, call_timeout=5.0, memory_mb=600))
    assert not report.passed and report.stage == "checker"
    reasons = " | ".join(f.reason for f in report.failures)
    assert f"raised {kind}" in reasons, reasons
    assert "TypeError" not in reasons, reasons
