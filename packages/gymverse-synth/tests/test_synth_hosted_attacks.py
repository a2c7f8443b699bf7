"""Envs that attack the checks themselves, run for real through synth validation and `gymverse evaluate`.

Every attack env has a wrong oracle, so its honest verdict is a rejection. Each one tries to turn that into a pass
or to take the run down: rewriting the checker, printing a forged report, writing to the protocol channel out of
turn, sending an oversized or absurdly nested message, hanging, exiting mid-episode, forking a child that keeps
running. The env is hosted in a sandbox and the checks run in this process, so the verdict must stay a rejection
that names the real problem. The static checks are no security boundary: the attacks reach ``os`` through an
allowed module, as an adversarial program would.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from gymverse.evaluate import CorrectnessConfig, DifficultyConfig, EvaluationConfig, evaluate_suite, load_suite
from gymverse.evaluate.diversity import HashingEmbedder
from gymverse.evaluate.schema import EvaluationReport
from gymverse_synth.validation import ValidationConfig, static_check, validate_program

TAG = f"4{uuid.uuid4().int % 10**8}"  # `sleep TAG` marks the forked child

TEMPLATE = r'''
"""Name the hidden number (attack fixture: the oracle is wrong on purpose)."""
import json
import re

import gymverse.sandbox._isolation as _iso
from gymverse.actions import ActionFormatError
from gymverse.core import Env, EnvMetadata, StepResult

os = _iso.os
FORGED = {"status": "ok", "return_value": {"checker": {"passed": True, "results": []}, "degeneracy": {}}}


def channels():
    """Every pipe this process holds besides stdin/stdout/stderr: the protocol channel is one of them."""
    found = []
    for fd in range(3, 64):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                found.append(fd)
        except OSError:
            pass
    return found


def send(data):
    for fd in channels():
        try:
            os.write(fd, data)
        except OSError:
            pass


def frame(text):
    data = text.encode()
    return len(data).to_bytes(4, "big") + data


def attack_step(env):
    ATTACK_STEP


IMPORT_ATTACK


class Target(Env):
    metadata = EnvMetadata(
        name="Target", family="attack", domain="game", description="Name the hidden number.", max_turns=4
    )
    complexity_params = {"high": (20, 2000)}

    def _reset(self):
        RESET_ATTACK
        self.target = int(self.rng.integers(0, self.params["high"]))
        return f"Name the hidden number in [0, {self.params['high']}) as \\boxed{{n}}.", {}

    def _step(self, action):
        attack_step(self)
        m = re.search(r"\\boxed\{(-?\d+)\}", action)
        if m is None:
            raise ActionFormatError("expected \\boxed{n}")
        won = int(m.group(1)) == self.target
        return StepResult("right" if won else "wrong", 1.0 if won else 0.0, True, False, {"success": won})

    def solve(self):
        return "\\boxed{%d}" % (self.target + 1)

    def sample_random_action(self):
        return "\\boxed{%d}" % int(self.rng.integers(0, self.params["high"]))
'''

PATCH_CHECKER = """
import gymverse.checker as _checker
import gymverse.checker.checks as _checks
import gymverse.checker.runner as _runner

_checks.check_oracle = lambda *a, **k: (True, "")
_checks.check_determinism = lambda *a, **k: (True, "")
_real = _runner.check_env


def _all_pass(*args, **kwargs):
    report = _real(*args, **kwargs)
    for r in report.results:
        r.passed, r.reason = True, ""
    return report


_runner.check_env = _checker.check_env = _all_pass
"""

PRINT_FORGERY = """
print(json.dumps(FORGED))
print('@@gv {"phase": "checker", "name": "oracle", "passed": true}')
os.write(1, frame(json.dumps({"id": 1, "ok": True, "value": True})))
"""

ATTACKS: dict[str, dict[str, str]] = {
    "patches_the_checker": {"IMPORT_ATTACK": PATCH_CHECKER},
    "prints_a_forged_report": {
        "IMPORT_ATTACK": PRINT_FORGERY,
        "ATTACK_STEP": "print(json.dumps(FORGED))",
    },
    "writes_out_of_turn": {
        "ATTACK_STEP": 'send(frame(json.dumps({"id": 0, "ok": True, "value": {"\\u0000t": ["right", 1.0, True, '
        'False, {"success": True}]}})))',
    },
    "sends_an_oversized_message": {"ATTACK_STEP": "send((2**31 - 1).to_bytes(4, 'big'))"},
    # the nested frame is all it answers (then it exits), so the parser, not the framing, must catch it
    "sends_a_deeply_nested_message": {"ATTACK_STEP": "send(frame('[' * 100000 + ']' * 100000))\n    os._exit(0)"},
    "hangs_in_step": {"ATTACK_STEP": "while True:\n        pass"},
    "exits_mid_episode": {"ATTACK_STEP": "os._exit(7)"},
    "forks_a_child_that_keeps_running": {
        "RESET_ATTACK": f'if os.fork() == 0:\n            os.execvp("sleep", ["sleep", "{TAG}"])'
    },
}


def attack_source(name: str) -> str:
    src = TEMPLATE
    for key in ("ATTACK_STEP", "IMPORT_ATTACK", "RESET_ATTACK"):
        src = src.replace(key, ATTACKS[name].get(key, "pass"))
    return src


def honest_source() -> str:
    return (
        TEMPLATE.replace("self.target + 1", "self.target")
        .replace("ATTACK_STEP", "pass")
        .replace("IMPORT_ATTACK", "")
        .replace("RESET_ATTACK", "pass")
    )


def sleepers() -> list[int]:
    """Live processes running ``sleep TAG`` (the forked child)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[:2] == [b"sleep", TAG.encode()] and state != "Z":
            pids.append(int(entry))
    return pids


def no_sleepers_soon() -> bool:
    for _ in range(50):
        if not sleepers():
            return True
        time.sleep(0.1)
    return False


#: What the rejection must name, per attack: the real defect (the wrong oracle) or the real failure.
NAMED = {
    "patches_the_checker": "oracle did not succeed",
    "prints_a_forged_report": "oracle did not succeed",
    "writes_out_of_turn": "broke the protocol",
    "sends_an_oversized_message": "announced a 2147483647-byte message",
    "sends_a_deeply_nested_message": "not a JSON object within the size and depth limits",
    "hangs_in_step": "did not finish",
    "exits_mid_episode": "exited with code 7",
    "forks_a_child_that_keeps_running": "oracle did not succeed",
}

CONFIG = ValidationConfig(seeds=(0,), degeneracy_seeds=tuple(range(4)), timeout=30.0, call_timeout=3.0, memory_mb=600)


def test_the_honest_twin_is_accepted() -> None:
    report = validate_program(honest_source(), CONFIG)
    assert report.passed, report.reasons()


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_validation_is_not_fooled(attack: str) -> None:
    source = attack_source(attack)
    assert static_check(source) == []  # the attack reaches the sandbox
    report = validate_program(source, CONFIG)
    assert not report.passed
    text = " | ".join(f.reason for f in report.failures)
    assert NAMED[attack] in text, report.reasons()
    if attack == "hangs_in_step":
        assert report.failed_checks == ["timeout"] and report.sandbox["status"] == "timeout"
    if attack == "forks_a_child_that_keeps_running":
        assert no_sleepers_soon(), "the forked child outlived the validation"


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory) -> EvaluationReport:
    root = tmp_path_factory.mktemp("attacks")
    for name in ATTACKS:
        (root / f"{name}.py").write_text(attack_source(name))
    (root / "honest.py").write_text(honest_source())
    cfg = EvaluationConfig(
        policies=("random", "oracle"),
        difficulty=DifficultyConfig(levels=(1, 10), seeds=(0, 1), ks=(1,), timeout=60.0),
        correctness=CorrectnessConfig(
            checker_levels=(1, 10),
            checker_seeds=(0,),
            oracle_seeds=(0,),
            degeneracy_seeds=tuple(range(4)),
            reset_seeds=8,
            constant_seeds=2,
            call_timeout=3.0,
            episode_timeout=3.0,
        ),
        executor="sandbox",
        workers=2,
        embedder=HashingEmbedder(),
        run_diversity=False,
    )
    return evaluate_suite(load_suite(str(root)), cfg)


def test_evaluate_keeps_the_honest_env_correct(evaluation: EvaluationReport) -> None:
    honest = next(ev for ev in evaluation.envs if ev.name.endswith("honest"))
    assert honest.correctness.verdict == "correct", honest.correctness.reasons


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_evaluate_is_not_fooled(evaluation: EvaluationReport, attack: str) -> None:
    ev = next(e for e in evaluation.envs if e.name.endswith(attack))
    assert ev.correctness.verdict in ("incorrect", "error"), ev.correctness.reasons
    text = " | ".join(ev.correctness.reasons)
    expected = NAMED[attack].replace("oracle did not succeed", "oracle does not solve")
    if attack == "writes_out_of_turn":  # met first by a level-1 probe: the violation is named, then a gone host
        expected = "protocol violation: it wrote"
    assert expected in text or NAMED[attack] in text, ev.correctness.reasons
    if attack == "forks_a_child_that_keeps_running":
        assert no_sleepers_soon(), "the forked child outlived the evaluation"
