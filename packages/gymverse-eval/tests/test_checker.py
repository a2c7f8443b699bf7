"""The env checker: passes a correct env, and catches each purpose-built broken env for its real reason."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymverse.actions import parse_boxed
from gymverse.checker import CHECK_NAMES, CheckReport, CheckResult, CheckTargetError, check_env
from gymverse.core import Env, StepResult
from gymverse.envs.game.guess_number import GuessTheNumber


# ---------------------------------------------------------------------------------------------- broken envs
class UnseededSource(GuessTheNumber):
    """Draws the hidden number (and a game id it shows) from OS entropy instead of self.rng."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        obs, info = super()._reset()
        wild = np.random.default_rng()  # unseeded: fresh OS entropy on every reset
        self.target = int(wild.integers(1, self.upper + 1))
        return f"Game #{int.from_bytes(os.urandom(4), 'big')}. {obs}", info


class OracleGivesUpAtTen(GuessTheNumber):
    """The oracle scans linearly on the largest range, which cannot finish within the budget."""

    def solve(self) -> str:
        if self.upper >= 5000:
            return r"\boxed{" + str(self.lo) + "}"
        return super().solve()


class IgnoresComplexity(GuessTheNumber):
    """Declares complexity params but always builds the same range."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.upper = 100
        self.target = int(self.rng.integers(1, self.upper + 1))
        self.lo, self.hi = 1, self.upper
        return "Guess an integer between 1 and 100.", {}


class RewardTooBig(GuessTheNumber):
    """Pays 10 on success while metadata declares rewards in [-0.1, 1]."""

    def _step(self, action: str) -> StepResult:
        res = super()._step(action)
        return res._replace(reward=10.0) if res.terminated else res


class RaisesInStep(GuessTheNumber):
    """A bug that fires on the second move."""

    def _step(self, action: str) -> StepResult:
        if self.turn == 2:
            raise RuntimeError("boom: lost track of the range")
        return super()._step(action)


class NeverEnds(GuessTheNumber):
    """Overrides step and swallows both termination and the turn-limit truncation."""

    def step(self, action: str) -> StepResult:
        res = super().step(action)
        self.done = False
        return res._replace(terminated=False, truncated=False)


class CrashesOnMalformed(GuessTheNumber):
    """Parses by string surgery and lets int() errors escape instead of raising ActionFormatError."""

    def _step(self, action: str) -> StepResult:
        guess = int(action.replace("\\boxed{", "").rstrip("}"))
        return super()._step(r"\boxed{" + str(guess) + "}")


class SeedsGlobalRandom(GuessTheNumber):
    """Deterministic, but by reseeding and drawing from Python's global `random`."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        obs, info = super()._reset()
        random.seed(self.seed_value)
        self.target = random.randint(1, self.upper)
        return obs, info


class SeedsGlobalNumpy(GuessTheNumber):
    """Deterministic, but through the legacy global `numpy.random` state."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        obs, info = super()._reset()
        np.random.seed(self.seed_value)  # noqa: NPY002 - the bug under test
        self.target = int(np.random.randint(1, self.upper + 1))  # noqa: NPY002
        return obs, info


class BrokenConstructor(GuessTheNumber):
    """Cannot even be built."""

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        raise OSError("missing data file")


class ExitsInStep(GuessTheNumber):
    """Calls sys.exit() from inside an episode."""

    def _step(self, action: str) -> StepResult:
        raise SystemExit(3)


class ShallowSnapshots(GuessTheNumber):
    """get_state shares mutable parts (history list, RNG) with the live env; clone returns the env itself."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.history: list[str] = []
        return super()._reset()

    def _step(self, action: str) -> StepResult:
        res = super()._step(action)
        self.history.append(action)
        return res._replace(observation=f"{res.observation} ({len(self.history)} guesses so far)")

    def get_state(self) -> dict[str, Any]:
        return dict(vars(self))

    def clone(self) -> Env:
        return self


class LeaksAcrossResets(GuessTheNumber):
    """Counts episodes on the instance, so reset(seed) does not reproduce the first observation."""

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.episodes = getattr(self, "episodes", 0) + 1
        obs, info = super()._reset()
        return f"Episode {self.episodes}. {obs}", info


@pytest.fixture(autouse=True)
def _restore_global_rngs() -> Iterator[None]:
    py, npy = random.getstate(), np.random.get_state()  # noqa: NPY002
    yield
    random.setstate(py)
    np.random.set_state(npy)  # noqa: NPY002


def _failed(report: CheckReport) -> set[str]:
    return {r.name for r in report.failures()}


# ---------------------------------------------------------------------------------------------- correct envs
def test_guess_the_number_passes_every_check() -> None:
    report = check_env("game:GuessTheNumber")
    assert report.passed, report.summary()
    assert {r.name for r in report.results} == set(CHECK_NAMES)
    # 11 episode checks × 3 levels × 3 seeds, 3 wrapper checks, 3 global ones
    assert len(report.results) == 11 * 9 + 3 + 3
    assert {r.level for r in report.by_name("oracle")} == {1, 5, 10}
    assert report.meta["env_name"] == "GuessTheNumber"


@pytest.mark.parametrize(
    "target",
    [
        GuessTheNumber,
        lambda **kw: GuessTheNumber(**kw),
        lambda: GuessTheNumber(),  # no complexity kwarg: the checker uses set_complexity
        "gymverse.envs.game.guess_number:GuessTheNumber",
        "gymverse.envs.game.guess_number",
    ],
    ids=["class", "kwargs-factory", "zero-arg-factory", "module:Class", "module"],
)
def test_every_kind_of_target_is_accepted(target: object) -> None:
    report = check_env(target, levels=(1, 10), seeds=(0,))
    assert report.passed, report.summary()
    assert {r.level for r in report.by_name("construct")} == {1, 10}


def test_an_env_like_that_is_not_an_env_passes_the_checker() -> None:
    from gymverse.core import Wrapper
    from gymverse.protocol import is_env_like
    from gymverse.wrappers import HistoryWrapper

    def factory(**kw: Any) -> Wrapper:
        return HistoryWrapper(GuessTheNumber(**kw), window=2)

    probe = factory()
    assert is_env_like(probe) and not isinstance(probe, Env)
    report = check_env(factory, levels=(1, 10), seeds=(0,))
    assert report.passed, report.summary()
    with pytest.raises(CheckTargetError, match="not an instance"):
        check_env(probe)  # an instance, proxy or not, is refused: the checker builds fresh envs


# ---------------------------------------------------------------------------------------------- broken envs caught
def test_unseeded_source_fails_determinism_only() -> None:
    report = check_env(UnseededSource, levels=(1,), seeds=(0, 1))
    assert _failed(report) == {"determinism"}
    assert all("first observation differs" in r.reason for r in report.by_name("determinism"))


def test_oracle_failing_at_level_ten_is_located() -> None:
    report = check_env(OracleGivesUpAtTen, seeds=(0, 1))
    assert _failed(report) == {"oracle"}
    assert {r.level for r in report.failures()} == {10}
    assert "oracle did not succeed" in report.failures()[0].reason
    assert "truncated" in report.failures()[0].reason


def test_complexity_that_changes_nothing() -> None:
    report = check_env(IgnoresComplexity, seeds=(0, 1, 2))
    assert _failed(report) == {"complexity_effect"}
    (res,) = report.by_name("complexity_effect")
    assert "identical instances" in res.reason
    assert "0, 1, 2" in res.reason


def test_reward_out_of_range_found_in_oracle_episode() -> None:
    report = check_env(RewardTooBig, levels=(1,), seeds=(0,))
    assert _failed(report) == {"reward_range"}
    assert "10.0" in report.failures()[0].reason
    assert "outside (-0.1, 1.0)" in report.failures()[0].reason


def test_raise_in_step_is_a_failed_result_with_traceback() -> None:
    report = check_env(RaisesInStep, levels=(1,), seeds=(0,))
    assert not report.passed
    (types,) = report.by_name("step_types")
    assert not types.passed
    assert "RuntimeError: 'boom: lost track of the range'" in types.reason  # the env's message, quoted
    assert (types.status, types.error_type) == ("error", "RuntimeError")
    assert "random episode, turn 2" in types.reason
    assert types.traceback is not None
    assert "_step" in types.traceback
    (ends,) = report.by_name("episode_ends")
    assert ends.reason.startswith("not judged")
    assert "step('garbage')" in report.by_name("malformed_actions")[0].reason
    # checks that never step are unaffected
    assert report.by_name("metadata")[0].passed


def test_never_ending_episode_is_bounded_and_reported() -> None:
    report = check_env(NeverEnds, levels=(1, 10), seeds=(0,))
    ends = report.by_name("episode_ends")
    assert len(ends) == 2
    assert not any(r.passed for r in ends)
    assert "still running after" in ends[0].reason
    assert not any(r.passed for r in report.by_name("oracle"))


def test_max_steps_caps_the_episode_guard() -> None:
    report = check_env(NeverEnds, levels=(1,), seeds=(0,), max_steps=3)
    assert "still running after 3 steps" in report.by_name("episode_ends")[0].reason


def test_crash_on_malformed_action() -> None:
    report = check_env(CrashesOnMalformed, levels=(1,), seeds=(0, 1))
    assert _failed(report) == {"malformed_actions"}
    reason = report.failures()[0].reason
    assert reason.startswith("step(''): raised ValueError: \"invalid literal for int()")


@pytest.mark.parametrize(("env_cls", "source"), [(SeedsGlobalRandom, "random"), (SeedsGlobalNumpy, "numpy.random")])
def test_touching_global_rng_is_caught(env_cls: type[Env], source: str) -> None:
    report = check_env(env_cls, levels=(1, 5), seeds=(0,))
    assert _failed(report) == {"global_rng"}
    assert f"global `{source}`" in report.failures()[0].reason


def test_shallow_snapshots_and_fake_clone() -> None:
    report = check_env(ShallowSnapshots, levels=(1, 10), seeds=(0,))
    assert _failed(report) == {"state_roundtrip", "clone"}
    assert report.by_name("state_roundtrip")[0].reason.startswith("after set_state: at [0]")
    assert "not an independent ShallowSnapshots" in report.by_name("clone")[0].reason


def test_state_leaking_across_resets() -> None:
    report = check_env(LeaksAcrossResets, levels=(1,), seeds=(0,))
    (det,) = report.by_name("determinism")
    assert not det.passed
    assert "reset(seed=0) on a used instance differs" in det.reason
    assert "Episode 2" in det.reason


def test_constructor_error_skips_dependent_checks() -> None:
    report = check_env(BrokenConstructor, levels=(1,), seeds=(0,))
    assert _failed(report) == set(CHECK_NAMES)
    assert "OSError: 'missing data file'" in report.by_name("construct")[0].reason
    assert {r.status for r in report.results if r.name == "reset"} == {"skipped"}
    assert report.by_name("oracle")[0].reason == "skipped: construct failed"


def test_sys_exit_inside_env_does_not_stop_the_checker() -> None:
    report = check_env(ExitsInStep, levels=(1,), seeds=(0,))
    assert "SystemExit" in report.by_name("step_types")[0].reason


# ---------------------------------------------------------------------------------------------- report and errors
def test_report_round_trips_through_json() -> None:
    report = check_env(RewardTooBig, levels=(1, 10), seeds=(0,))
    back = CheckReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back == report
    assert back.passed is False
    assert back.failures() == report.failures()
    assert "FAIL reward_range [level=1 seed=0]" in back.summary()
    assert CheckReport.from_json(report.to_json()) == report


def test_canon_survives_cycles_and_numpy() -> None:
    from gymverse.conformance import canon

    class Node:
        def __init__(self) -> None:
            self.next: Node = self
            self.arr = np.arange(3, dtype=np.int64)

    a, b = canon(Node()), canon(Node())
    assert a == b
    name = Node.__qualname__
    assert a == [name, {"arr": ["ndarray", "int64", [3], [0, 1, 2]], "next": f"<{name}>"}]
    assert canon({"x": float("nan")}) == canon({"x": float("nan")})


def test_summary_counts_repeated_failures() -> None:
    report = CheckReport(
        "x",
        [CheckResult("oracle", False, "nope", 10, s) for s in range(3)] + [CheckResult("metadata", True)],
    )
    assert report.summary().splitlines() == [
        "x: FAILED (1/4 checks passed)",
        "  FAIL oracle [level=10 seed=0]: nope (+2 more)",
    ]
    assert not CheckReport("empty").passed


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("game:GuessTheNumbr", "did you mean game:GuessTheNumber"),
        (42, "cannot check a int"),
        (GuessTheNumber(), "not an instance"),
        (Env, "abstract"),
        (dict, "not a gymverse Env subclass"),
        ("no/such/file.py", "no such file"),
    ],
)
def test_bad_target_raises_clear_error(target: object, message: str) -> None:
    with pytest.raises(CheckTargetError, match=message):
        check_env(target)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"levels": (0,)}, "complexity"), ({"seeds": (-1,)}, "seeds"), ({"max_steps": 0}, "max_steps")],
)
def test_bad_settings_raise(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_env("game:GuessTheNumber", **kwargs)


def test_env_kwargs_reach_the_constructor() -> None:
    report = check_env(GuessTheNumber, levels=(1,), seeds=(0,), env_kwargs={"max_turns": 1})
    # one guess at 1..10 cannot be guaranteed: the oracle check must notice
    assert "oracle" in _failed(report)


def test_on_result_sees_every_result_in_order() -> None:
    seen: list[str] = []
    report = check_env(GuessTheNumber, levels=(1,), seeds=(0,), on_result=lambda r: seen.append(r.name))
    assert seen == [r.name for r in report.results]


def test_checker_itself_does_not_touch_global_rngs() -> None:
    py = random.getstate()
    npy: Any = np.random.get_state(legacy=True)  # noqa: NPY002
    check_env(GuessTheNumber, levels=(1,), seeds=(0,))
    assert random.getstate() == py
    now: Any = np.random.get_state(legacy=True)  # noqa: NPY002
    assert np.array_equal(now[1], npy[1])


def test_parse_boxed_is_what_envs_use() -> None:
    # guards the malformed-action list: each must be rejected by the standard parser
    from gymverse.actions import ActionFormatError
    from gymverse.checker.checks import MALFORMED_ACTIONS

    for action in MALFORMED_ACTIONS:
        with pytest.raises(ActionFormatError):
            parse_boxed(action)
    assert len(MALFORMED_ACTIONS[-1]) == 100_000


def test_module_entry_point_prints_only_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from gymverse.checker.__main__ import main as checker_main

    path = tmp_path / "chatty.py"
    path.write_text(
        "from gymverse.envs.game.guess_number import GuessTheNumber\n\n"
        "class Chatty(GuessTheNumber):\n"
        "    def _reset(self):\n"
        "        print('debug output from the env')\n"
        "        return super()._reset()\n"
        "    def solve(self) -> str:\n"
        "        return r'\\boxed{1}'\n"
    )
    assert checker_main([str(path), "--levels", "1", "--seeds", "0,1"]) == 1
    out, err = capsys.readouterr()
    report = CheckReport.from_json(out)
    assert report.failed_names() == ["oracle"]
    assert "debug output from the env" in err
    assert checker_main(["game:Nope"]) == 2
    assert "unknown env id" in json.loads(capsys.readouterr().out)["error"]


def test_every_env_the_checker_builds_is_closed() -> None:
    class CountsCloses(GuessTheNumber):
        built = 0
        closed = 0

        def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
            super().__init__(complexity, seed, max_turns)
            CountsCloses.built += 1

        def close(self) -> None:
            CountsCloses.closed += 1

    assert check_env(CountsCloses, levels=(1, 10), seeds=(0,)).passed
    assert CountsCloses.built > 10
    assert CountsCloses.closed == CountsCloses.built
