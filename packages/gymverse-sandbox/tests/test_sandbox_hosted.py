"""Hosted envs: the env in a sandboxed host process, the checker here, driving it call by call.

The checker must reach the same verdicts against a hosted env as against the env in this process; the protocol
must treat the host's answers as untrusted (codec, framing); a hung, dying or misbehaving host must be contained
and named; and the checks that read the env's own process (global RNG, instance attributes) must be done there.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from gymverse.checker import check_env
from gymverse.core import Env, StepResult
from gymverse.deadline import CallTimeout, deadline
from gymverse.protocol import is_env_like
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox._codec import CodecError, RemoteObject, decode, encode
from gymverse.sandbox.hosted import EnvCallError, EnvHost, EnvHostError, EnvHostTimeout, HostedEnv

FACTORY = "gymverse.loader:build_from_ref"
LIMITS = SandboxLimits(timeout=120, memory_mb=1024)

ENV = r'''
"""Guess the number; BEHAVIOUR is planted per test."""
import random
import re
import time

from gymverse.actions import ActionFormatError
from gymverse.core import Env, EnvMetadata, StepResult


class Guess(Env):
    metadata = EnvMetadata(name="Guess", family="test", domain="game", description="Guess it.", max_turns=6)
    complexity_params = {"high": (10, 1000)}

    def _reset(self):
        self.target = int(self.rng.integers(0, self.params["high"]))
        self.board = (1, {2, 3}, [4.5])
        return f"Guess in [0, {self.params['high']}).", {"shape": (2, 3)}

    def _step(self, action):
        BEHAVIOUR
        m = re.search(r"\\boxed\{(-?\d+)\}", action)
        if m is None:
            raise ActionFormatError("expected \\boxed{n}")
        won = int(m.group(1)) == self.target
        return StepResult("right" if won else "wrong", 1.0 if won else 0.0, True, False, {"success": won})

    def solve(self):
        return "\\boxed{%d}" % self.target

    def sample_random_action(self):
        return "\\boxed{%d}" % int(self.rng.integers(0, self.params["high"]))
'''


def hosted(behaviour: str = "pass", **kw: object) -> EnvHost:
    src = ENV.replace("BEHAVIOUR", behaviour)
    return EnvHost(FACTORY, ["file:guess.py"], files={"guess.py": src}, limits=LIMITS, **kw)  # type: ignore[arg-type]


def summary(report: object) -> list[tuple[str, bool, int | None, int | None]]:
    return [(r.name, r.passed, r.level, r.seed) for r in report.results]  # type: ignore[attr-defined]


@pytest.mark.parametrize("env_id", ["game:Mastermind", "logic:LatinSquare", "tool-use:BankTransfers"])
def test_checker_verdicts_match_the_in_process_run(env_id: str) -> None:
    local = check_env(env_id, levels=(1, 10), seeds=(0,))
    with EnvHost(FACTORY, [env_id], limits=LIMITS) as host:
        remote = check_env(host.make, levels=(1, 10), seeds=(0,), env_id=env_id)
        probe = host.make(1)  # the proxy implements EnvLike; it is not an Env with a skipped __init__
        assert is_env_like(probe) and not isinstance(probe, Env)
        probe.close()
    assert summary(remote) == summary(local)
    assert [r.reason for r in remote.results] == [r.reason for r in local.results]
    assert remote.passed


def test_a_hosted_env_behaves_like_the_real_one(tmp_path: Path) -> None:
    with hosted() as host:
        env = host.make(3)
        assert isinstance(env, HostedEnv) and type(env).__name__ == "Guess"
        assert env.complexity == 3 and env.metadata.max_turns == 6 and env.metadata.reward_range == (-0.1, 1.0)
        _, info = env.reset(seed=1)
        assert info["shape"] == (2, 3) and env.params["high"] > 10
        res = env.step(env.solve())
        assert isinstance(res, StepResult) and res.info["success"] is True and env.done
        env.reset(seed=1)
        snap = env.get_state()
        twin = env.clone()
        assert twin is not env and type(twin) is type(env)
        first = env.step("\\boxed{-1}")
        env.set_state(snap)
        assert env.step("\\boxed{-1}") == first == twin.step("\\boxed{-1}")
        with pytest.raises(EnvCallError) as err:
            env.step("\\boxed{1}")  # stepping an ended episode is the env's own RuntimeError
        assert isinstance(err.value, RuntimeError) and "after the episode ended" in str(err.value)
        with pytest.raises(ValueError, match="complexity must be in"):
            env.set_complexity(11)


def test_the_env_globals_and_attributes_are_read_in_its_own_process() -> None:
    with hosted("random.random()") as host:
        report = check_env(host.make, levels=(1,), seeds=(0,))
    rng = [r for r in report.results if r.name == "global_rng"]
    assert rng and not rng[0].passed and "global `random`" in rng[0].reason
    assert any(r.name == "complexity_effect" and r.passed for r in report.results)


def test_a_hung_call_is_stopped_and_named_and_the_next_make_gets_a_fresh_host() -> None:
    with hosted("time.sleep(60)", call_timeout=1.5) as host:
        env = host.make(1)
        env.reset(seed=0)
        with pytest.raises(EnvHostTimeout, match=r"did not answer step\('\\\\boxed\{1\}'\) within 1.5s"):
            env.step("\\boxed{1}")
        with pytest.raises(EnvHostError, match="gone"):
            env.reset(seed=0)
        assert host.make(1).reset(seed=0)[0].startswith("Guess")
        assert host.starts == 2


def test_a_deadline_in_a_worker_thread_bounds_the_wait() -> None:
    caught: list[BaseException] = []

    def worker() -> None:
        with hosted("time.sleep(60)", call_timeout=30) as host:
            env = host.make(1)
            env.reset(seed=0)
            try:
                with deadline(1.0, "one step"):
                    env.step("\\boxed{1}")
            except CallTimeout as err:
                caught.append(err)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(20)
    assert caught and "one step did not finish within 1s" in str(caught[0])


def test_a_host_that_keeps_dying_is_given_up_on() -> None:
    with hosted("import os; os._exit(9)", max_restarts=1) as host:
        for _ in range(2):
            env = host.make(1)
            env.reset(seed=0)
            with pytest.raises(EnvHostError, match="exited with code 9"):
                env.step("\\boxed{1}")
        with pytest.raises(EnvHostError, match="died 2 times; not restarting"):
            host.make(1)


class Thing:
    def __init__(self) -> None:
        self.x = 1


def test_codec_round_trips_what_envs_return() -> None:
    value = {"t": (1, "a"), "s": {3, 1}, "n": np.int64(7), "a": np.arange(6).reshape(2, 3), 5: None, "f": 1.5}
    back = decode(encode(value))
    assert back["t"] == (1, "a") and back["s"] == {1, 3} and back[5] is None
    assert isinstance(back["n"], np.int64) and back["n"] == 7
    assert isinstance(back["a"], np.ndarray) and back["a"].shape == (2, 3)

    assert decode(encode(Thing())) == RemoteObject("Thing", {"x": 1})


@pytest.mark.parametrize(
    "payload",
    [
        {"\0n": ["O", 1]},  # an object dtype would let anything through
        {"\0a": ["<i8", [5], [1, 2]]},  # shape lies
        {"\0d": [[[1], 2]]},  # unhashable key
        {"\0x": 1},  # unknown tag
        {"\0t": "not a list"},
    ],
)
def test_codec_rejects_malformed_tags(payload: object) -> None:
    with pytest.raises(CodecError):
        decode(payload)


PREPARE = """
import time


def prepare(ref):
    try:
        open("/etc/passwd").close()
    except OSError:
        pass
    time.sleep(1.5)  # an installed suite's import, e.g. reasoning-gym: seconds
"""


def test_prepare_runs_before_the_first_build_under_its_own_deadline_and_is_audited() -> None:
    files = {"guess.py": ENV.replace("BEHAVIOUR", "pass"), "slow_import.py": PREPARE}
    with EnvHost(FACTORY, ["file:guess.py"], files=files, limits=LIMITS, prepare="slow_import:prepare") as host:
        host.start()
        with deadline(1.0, "building the env"):  # the 1.5 s were paid by start(), not by the build
            env = host.make(1)
        assert env.reset(seed=0)[0].startswith("Guess")
        assert any("/etc/passwd" in detail for _, detail in host.audit), host.audit
    late = EnvHost(FACTORY, ["file:guess.py"], files=files, limits=LIMITS, prepare="slow_import:prepare")
    with late, pytest.raises(CallTimeout, match="building the env"), deadline(1.0, "building the env"):
        late.make(1)  # not started: the build waits for the prepare
