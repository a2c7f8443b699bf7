"""Env hosts forked from a warm zygote (`EnvHost(forked=True)`): the same contract as a freshly launched host, and
nothing of one host reaches the next one its zygote serves.

Hosts of different envs share a zygote one after another, so the attacks here are the ones sharing could open: a
process left running, a file left in the work dir or /tmp, a planted module. Each must be gone (or unreadable) for
the next host, and a host that hangs or dies must be contained and named as a freshly launched one is.
"""

from __future__ import annotations

import uuid

import pytest
from gymverse.sandbox import SandboxLimits, _host_launch
from gymverse.sandbox._host_launch import ZYGOTES
from gymverse.sandbox.hosted import EnvCallError, EnvHost, EnvHostError, EnvHostTimeout, HostedEnv

FACTORY = "gymverse.loader:build_from_ref"
LIMITS = SandboxLimits(timeout=120, memory_mb=1024)

ENV = r'''
"""Name the number; SETUP runs at import, BEHAVIOUR in every step."""
import os
import re
import subprocess
import time

from gymverse.actions import ActionFormatError
from gymverse.core import Env, EnvMetadata, StepResult

SETUP


class Probe(Env):
    metadata = EnvMetadata(name="Probe", family="test", domain="game", description="Name it.", max_turns=3)

    def _reset(self):
        self.target = int(self.rng.integers(0, 10))
        return "Name a number in [0, 10).", {}

    def _step(self, action):
        BEHAVIOUR
        m = re.search(r"\\boxed\{(-?\d+)\}", action)
        if m is None:
            raise ActionFormatError("expected \\boxed{n}")
        won = int(m.group(1)) == self.target
        return StepResult("right" if won else "wrong", 1.0 if won else 0.0, True, False, {"success": won})

    def solve(self):
        return "\\boxed{%d}" % self.target
'''


def forked(setup: str = "", behaviour: str = "pass", **kw: object) -> EnvHost:
    src = ENV.replace("SETUP", setup or "pass").replace("BEHAVIOUR", behaviour)
    return EnvHost(FACTORY, ["file:probe.py"], files={"probe.py": src}, limits=LIMITS, forked=True, **kw)  # type: ignore[arg-type]


def zygote_pid(host: EnvHost) -> int:
    """The pid of the zygote serving `host`'s live process."""
    return int(host._session.job.zygote.proc.pid)  # type: ignore[union-attr]


def step_value(host: EnvHost, action: str = "\\boxed{1}") -> object:
    env = host.make(1)
    env.reset(seed=0)
    return env.step(action)


def test_a_forked_host_runs_the_env_confined_and_its_zygote_serves_the_next_host() -> None:
    with forked() as host:
        env = host.make(1)
        assert isinstance(env, HostedEnv) and type(env).__name__ == "Probe"
        env.reset(seed=3)
        assert env.step(env.solve()).info["success"] is True
    assert host.result is not None and host.result.status == "ok"
    measures = host.result.isolation
    assert "zygote" in measures and "seccomp" in measures and "netns" in measures
    assert any(m.startswith("uid:") for m in measures)
    idle = sum(len(z) for z in ZYGOTES._idle.values())
    with forked() as again:
        again.make(1).reset(seed=0)
        assert sum(len(z) for z in ZYGOTES._idle.values()) == idle - 1  # the idle zygote serves it
    assert again.result is not None and again.result.status == "ok"
    uids = [next(m for m in r.isolation if m.startswith("uid:")) for r in (host.result, again.result)]
    assert uids[0] != uids[1]  # each host runs under a uid of its own


def test_what_one_host_leaves_behind_is_gone_for_the_next() -> None:
    tag = f"gv{uuid.uuid4().hex[:12]}"
    plant = (
        f"open('/tmp/{tag}', 'w').write('x'); open('{tag}.py', 'w').write('LEFT = 1');"
        f" subprocess.Popen(['sleep', '300', '{tag}'])"
    )
    with forked(behaviour=plant) as host:
        step_value(host)
        first = zygote_pid(host)
    look = (
        f"raise RuntimeError(repr([os.path.exists('/tmp/{tag}'), os.path.exists('{tag}.py'),"
        f" any('{tag}' in open(f'/proc/{{p}}/cmdline').read() for p in os.listdir('/proc') if p.isdigit())]))"
    )
    with forked(behaviour=look) as host:
        host.start()
        assert zygote_pid(host) == first  # the same zygote (and PID namespace) served the planting host
        with pytest.raises(EnvCallError) as err:
            step_value(host)
    assert isinstance(err.value, RuntimeError) and str(err.value) == "[False, False, False]"


def test_a_hung_forked_host_is_stopped_named_and_replaced() -> None:
    with forked(behaviour="time.sleep(60)", call_timeout=1.5) as host:
        with pytest.raises(EnvHostTimeout, match=r"within 1\.5s"):
            step_value(host)
        assert host.make(1).reset(seed=0)[0].startswith("Name a number")
        assert host.starts == 2
    with forked() as host:  # the killed zygote is not handed out again
        assert step_value(host, "\\boxed{-1}").reward == 0.0  # type: ignore[attr-defined]


def test_a_forked_host_that_exits_mid_call_is_named_with_its_exit_code() -> None:
    with forked(behaviour="os._exit(9)", max_restarts=0) as host:
        with pytest.raises(EnvHostError, match="exited with code 9"):
            step_value(host)
        with pytest.raises(EnvHostError, match="died 1 times; not restarting"):
            host.make(1)


def test_a_zygote_that_cannot_start_costs_the_fork_not_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("sandbox pool zygote failed to start (see its stderr)")

    monkeypatch.setattr(_host_launch, "Zygote", broken)
    monkeypatch.setattr(ZYGOTES, "_idle", {})  # no warm zygote to take: a new one must start, and cannot
    with forked() as host:
        assert step_value(host, "\\boxed{-1}").reward == 0.0  # type: ignore[attr-defined]
    assert host.result is not None and host.result.status == "ok"
    assert "zygote" not in host.result.isolation and "seccomp" in host.result.isolation  # a launcher of its own
