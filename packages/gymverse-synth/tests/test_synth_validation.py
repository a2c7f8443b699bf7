"""Validation: static checks, then the core checker and degeneracy policies inside the sandbox; each broken fixture
program must be rejected for its real reason (the specific check), and the limits must contain hangs and bombs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from gymverse_synth.validation import ValidationConfig, ValidationReport, static_check, validate_program

FIX = Path(__file__).parent / "synth_fixtures"
#: Short limits: every fixture finishes in ~1 s; the hanging one costs the timeout.
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=6.0, memory_mb=600)


def program(name: str) -> str:
    return (FIX / f"{name}.py").read_text()


def test_correct_program_is_accepted() -> None:
    report = validate_program(program("good_env"), FAST)
    assert report.passed and report.stage == "accepted", report.reasons()
    assert report.failures == []
    assert report.checks_total > 50 and report.checks_passed == report.checks_total
    assert report.env_name == "SortBySwaps"
    # degeneracy evidence: both policies at both levels, all far below the limit
    assert set(report.degeneracy) == {"constant@5", "random@5", "constant@10", "random@10"}
    assert max(report.degeneracy.values()) <= 0.25
    assert report.sandbox["status"] == "ok"
    assert ValidationReport.model_validate_json(report.model_dump_json()) == report


def test_crash_at_level_10_is_caught_at_level_10() -> None:
    report = validate_program(program("crash_level10"), FAST)
    assert not report.passed and report.stage == "checker"
    reset = [f for f in report.failures if f.check == "reset"]
    assert reset and {f.level for f in reset} == {10}
    assert "IndexError" in reset[0].reason and reset[0].traceback
    # checks skipped because reset failed are not reported as failures of their own
    assert not any(f.reason.startswith("skipped:") for f in report.failures)


def test_complexity_that_changes_nothing_is_caught() -> None:
    report = validate_program(program("no_effect"), FAST)
    assert not report.passed
    assert report.failed_checks == ["complexity_effect"]
    assert "complexity params are not used" in report.failures[0].reason


def test_wrong_oracle_is_caught() -> None:
    report = validate_program(program("oracle_fails"), FAST)
    assert not report.passed
    assert report.failed_checks == ["oracle"]
    assert "oracle did not succeed" in report.failures[0].reason


def test_infinite_loop_is_contained_by_the_timeout() -> None:
    report = validate_program(program("loops_forever"), replace(FAST, timeout=5.0))
    assert not report.passed and report.stage == "checker"
    assert report.failed_checks == ["timeout"]
    assert report.sandbox["status"] == "timeout"
    # the progress stream tells which check was running: reset of the first episode
    assert "after check 'construct'" in report.failures[0].reason
    assert report.failures[0].level == 1


def test_memory_bomb_is_contained() -> None:
    report = validate_program(program("memory_bomb"), FAST)
    assert not report.passed
    assert report.failed_checks == ["memory"], report.reasons()
    assert "600 MB" in report.failures[0].reason


def test_degenerate_task_is_rejected() -> None:
    report = validate_program(program("degenerate_env"), FAST)
    assert not report.passed and report.stage == "degeneracy"
    assert set(report.failed_checks) == {"degenerate_constant", "degenerate_random"}
    assert report.degeneracy["constant@5"] == 1.0
    assert "won without solving it" in report.failures[0].reason


def test_program_that_does_not_load_fails_at_load() -> None:
    src = program("good_env").replace("GRAMMAR = CommandGrammar", "GRAMMAR = undefined_name + CommandGrammar")
    report = validate_program(src, FAST)
    assert report.stage == "load" and report.failed_checks == ["load"]
    assert "NameError" in report.failures[0].reason and "undefined_name" in report.failures[0].reason


BASE = program("good_env")


@pytest.mark.parametrize(
    ("source", "check"),
    [
        ("class A(Env:\n", "syntax"),
        ("import random\n" + BASE, "imports"),
        ("import os\n" + BASE, "imports"),
        ("from . import x\n" + BASE, "imports"),
        ("import numpy as np\n" + BASE.replace("self.rng.permutation(n)", "np.random.permutation(n)"), "global_rng"),
        ("from numpy.random import randint\n" + BASE, "global_rng"),
        (BASE.replace("cmd = GRAMMAR.parse(action)", "cmd = eval('GRAMMAR').parse(action)"), "forbidden_call"),
        (BASE.replace("n = len(", "n = ().__class__.__subclasses__() and len("), "forbidden_attribute"),
        (BASE.replace("def solve(self)", "def oracle(self)"), "env_class"),
        (BASE.replace("(Env)", "(object)"), "env_class"),
    ],
)
def test_static_checks(source: str, check: str) -> None:
    failures = static_check(source)
    assert check in [f.check for f in failures], [f.describe() for f in failures]
    report = validate_program(source, FAST)  # static failures never reach the sandbox
    assert report.stage == "static" and report.sandbox == {}


def test_static_check_names_the_line_and_allows_the_safe_subset() -> None:
    assert static_check(BASE) == []
    ok = "import math\nimport numpy as np\nfrom numpy.random import default_rng\nfrom gymverse.core import Env\n"
    assert [f.check for f in static_check(ok + BASE)] == []
    failures = static_check("import json\nimport subprocess\n" + BASE)
    assert failures[0].line == 2 and "'subprocess'" in failures[0].reason
    assert "self.rng" in static_check("import random\n" + BASE)[0].reason


def test_missing_methods_are_named() -> None:
    failures = static_check(BASE.replace("def _reset(", "def reset_(").replace("def solve(", "def oracle("))
    assert "does not implement _reset, solve" in failures[0].reason


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValueError, match=">= 5"):
        ValidationConfig(degeneracy_levels=(3,))


def test_a_program_that_reads_outside_its_box_is_rejected_as_unsafe() -> None:
    # passes the static checks (numpy is allowed) and swallows the sandbox's denial: only the audit hook sees it
    peek = (
        '        n = int(self.params["length"])\n'
        "        try:\n"
        '            self.motd = np.fromfile("/etc/passwd", dtype=np.uint8)[:64]  # flavour text\n'
        "        except OSError:\n"
        "            self.motd = None\n"
    )
    src = program("good_env").replace("from typing import Any\n", "from typing import Any\n\nimport numpy as np\n", 1)
    src = src.replace('        n = int(self.params["length"])\n', peek, 1)
    report = validate_program(src, FAST)
    assert not report.passed and report.stage == "sandbox", report.reasons()
    assert report.failed_checks == ["unsafe"] and "read_file /etc/passwd" in report.failures[0].reason
    assert report.sandbox["audit"] == [["read_file", "/etc/passwd"]]
    assert validate_program(program("good_env"), FAST).sandbox["audit"] == []
