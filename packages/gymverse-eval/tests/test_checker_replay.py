"""The determinism check of a hosted env from one recorded request (`HostedEnv.lockstep`, `checker._replay`).

The verdict and its reason must be exactly those of the live, call-by-call check (and of the in-process check), for
deterministic envs, envs that diverge, and envs that raise mid-lockstep; a record that does not match what the
check asks for is never judged: the live envs are checked instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from gymverse.checker import check_env
from gymverse.checker import checks as C
from gymverse.checker._replay import OffScript, replayed_pair
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox.hosted import EnvCallError, EnvHost, HostedEnv

FACTORY = "gymverse.loader:build_from_ref"
LIMITS = SandboxLimits(timeout=120, memory_mb=1024)

ENV = r"""
import itertools
import re

from gymverse.core import Env, EnvMetadata, StepResult

_counter = itertools.count()


class Walk(Env):
    metadata = EnvMetadata(name="Walk", family="test", domain="game", description="Walk to the end.", max_turns=5)
    complexity_params = {"length": (2, 4)}

    def _reset(self):
        self.pos = 0
        return f"Walk {self.params['length']} steps.RESET_EXTRA", {}

    def _step(self, action):
        STEP_EXTRA
        self.pos += 1
        done = self.pos >= self.params["length"]
        return StepResult(f"at {self.pos}", 1.0 if done else 0.0, done, False, {"success": done})

    def solve(self):
        return "\\boxed{go}"

    def sample_random_action(self):
        return "\\boxed{go}"
"""

CASES = {
    "deterministic": ("", "pass"),
    "first observation differs": (" {next(_counter)}", "pass"),
    "transcripts diverge mid-episode": ("", "self.pos += next(_counter) % 2"),
    "a step raises on the second env": ("", "if next(_counter) == 1: raise KeyError('lost the map')"),
}


def source(case: str) -> str:
    extra_reset, extra_step = CASES[case]
    return ENV.replace("RESET_EXTRA", extra_reset).replace("STEP_EXTRA", extra_step)


def live_outcome(build: Any, level: int, seed: int) -> tuple[bool, str] | str:
    """check_determinism on the live envs, call by call (no lockstep request)."""
    try:
        return C._determinism(build(level), build(level), seed, None)
    except Exception as err:
        return f"{type(err).__name__}: {err}"


def outcome(build: Any, level: int, seed: int) -> tuple[bool, str] | str:
    try:
        return C.check_determinism(build, level, seed, None)
    except Exception as err:
        return f"{type(err).__name__}: {err}"


@pytest.mark.parametrize("case", list(CASES))
def test_the_replayed_check_judges_as_the_live_and_the_in_process_ones(case: str, tmp_path: Path) -> None:
    path = tmp_path / "walk.py"
    path.write_text(source(case))
    local = check_env(str(path), levels=(3,), seeds=(0,))
    local_det = next(r for r in local.results if r.name == "determinism")
    # each run gets a fresh host: the counter that makes an env diverge starts over, as in the in-process run
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": source(case)}, limits=LIMITS) as host:
        replayed = outcome(host.make, 3, 0)
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": source(case)}, limits=LIMITS) as host:
        live = live_outcome(host.make, 3, 0)
    assert replayed == live  # the same verdict and the same words
    if isinstance(replayed, tuple):
        assert replayed[0] is local_det.passed
    else:  # the env's own exception, raised where the live call raised it
        assert replayed.startswith("KeyError") and "lost the map" in replayed
    assert (case == "deterministic") is (replayed == C.OK)


def test_the_whole_lockstep_is_one_request() -> None:
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": source("deterministic")}, limits=LIMITS) as host:
        a, b = host.make(3), host.make(3)
        sent = a._session.seq
        ra, rb = replayed_pair(a, b, 0, None)
        assert a._session.seq == sent + 1
        assert C._determinism(ra, rb, 0, None) == C.OK


def test_a_record_that_leaves_the_script_is_not_judged_the_live_envs_are(monkeypatch: pytest.MonkeyPatch) -> None:
    forged: list[dict[str, Any]] = []

    def forge(self: HostedEnv, other: HostedEnv, seed: int, max_steps: int | None) -> dict[str, Any]:
        # a host claiming identical resets and then skipping ahead to a reset: not what the check asks for next
        calls: list[list[object]] = [["a", "reset", ("x", {})], ["b", "reset", ("x", {})], ["a", "reset", ("x", {})]]
        record: dict[str, Any] = {"calls": calls, "error": None}
        forged.append(record)
        return record

    monkeypatch.setattr(HostedEnv, "lockstep", forge)
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": source("first observation differs")},
                 limits=LIMITS) as host:  # fmt: skip
        passed, reason = C.check_determinism(host.make, 3, 0, None)
    assert forged and not passed and "first observation differs" in reason


def test_a_recorded_env_error_is_raised_where_the_live_call_would_raise() -> None:
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": source("a step raises on the second env")},
                 limits=LIMITS) as host:  # fmt: skip
        ra, rb = replayed_pair(host.make(3), host.make(3), 0, None)
        ra.reset(seed=0)
        rb.reset(seed=0)
        action = ra.sample_random_action()
        assert rb.sample_random_action() == action
        ra.step(action)
        with pytest.raises(EnvCallError, match="lost the map") as err:
            rb.step(action)
        assert isinstance(err.value, KeyError)
        with pytest.raises(OffScript):
            ra.step(action)


BROKEN = {
    "set_state ignores the snapshot": "    def set_state(self, state):\n        pass\n",
    "clone returns itself": "    def clone(self):\n        return self\n",
    "clone shares its state": "    def clone(self):\n        twin = copy.copy(self)\n        return twin\n",
    "a malformed action raises": "    def step(self, action):\n        if 'garbage' in action:\n"
    "            raise ValueError('cannot parse')\n        return super().step(action)\n",
    "format_error never set": "    def step(self, action):\n        if 'boxed{go}' not in action:\n"
    "            return StepResult('huh', -0.1, False, False, {})\n        return super().step(action)\n",
}


def checked(case: str, monkeypatch: pytest.MonkeyPatch, live: bool) -> list[tuple[str, bool, str]]:
    if live:  # every check call by call, as before the recorded requests
        import gymverse.checker._replay as R

        def off(*_: object) -> Any:
            raise R.OffScript("live")

        monkeypatch.setattr(R, "replayed", off)
        monkeypatch.setattr(R, "replayed_pair", off)
    src = "import copy\n" + source("deterministic").replace("\n    def solve", BROKEN[case] + "\n    def solve")
    with EnvHost(FACTORY, ["file:walk.py"], files={"walk.py": src}, limits=LIMITS) as host:
        report = check_env(host.make, levels=(2, 4), seeds=(0, 1))
        sent = host._session.seq if host._session is not None else 0
    monkeypatch.undo()
    # a proxy's repr numbers the envs of its host: a fallback after a record built one more
    rows = [(r.name, r.passed, re.sub(r"hosted #\d+", "hosted #N", r.reason)) for r in report.results]
    return [*rows, ("requests", sent > 0, str(sent))]


@pytest.mark.parametrize("case", list(BROKEN))
def test_recorded_state_and_malformed_checks_judge_as_the_live_ones(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded, live = checked(case, monkeypatch, False), checked(case, monkeypatch, True)
    assert recorded[:-1] == live[:-1]  # every check: same verdict, same words
    assert any(not passed for name, passed, _ in recorded[:-1] if name != "oracle")  # the planted defect is found
    assert int(recorded[-1][2]) < int(live[-1][2])  # in fewer requests
