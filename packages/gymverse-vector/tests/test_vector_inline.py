"""The async backend's three ways to run an env (native coroutine, inline on the loop, worker thread) agree."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import gymverse
import gymverse.testing.vectest  # registers the vectest: envs
import numpy as np
import pytest
from gymverse import EnvLike
from gymverse.testing import vectest as vt
from gymverse.testing.vectest import Tag
from gymverse.vector import AsyncVecEnv, declares_nonblocking, make_vec

count = functools.partial(vt.Count)
faulty = functools.partial(vt.Faulty, fail_rate=0.3, reset_fail_rate=0.3)
sleepy = functools.partial(vt.SleepIO, delay=0.0)


def _transcript(venv: Any, steps: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(5)
    out: list[tuple[Any, ...]] = [tuple(venv.reset(seed=100)[0])]
    for _ in range(steps):
        r = venv.step([r"\boxed{" + str(int(rng.integers(1, 4))) + "}" for _ in range(venv.num_envs)])
        finals = [info.get("final_observation") for info in r.infos]
        errors = [info.get("final_info", info).get("error") for info in r.infos]
        out.append((tuple(r.observations), tuple(r.rewards), tuple(r.truncated), tuple(finals), tuple(errors)))
    return out


def test_nonblocking_is_declared_per_class_and_not_inherited_through_wrappers() -> None:
    assert declares_nonblocking(count())
    assert declares_nonblocking(faulty())
    assert not declares_nonblocking(sleepy())  # its blocking step sleeps
    assert not declares_nonblocking(gymverse.make("vectest:Hang"))
    assert not declares_nonblocking(Tag(count()))  # a wrapper may add waiting of its own


@pytest.mark.parametrize("step_timeout", [None, 30.0])
def test_inline_and_threaded_paths_give_the_sync_transcript(step_timeout: float | None) -> None:
    ids: list[Callable[[], EnvLike]] = [count, faulty, sleepy, lambda: Tag(count())]
    with make_vec(ids, seed=3) as ref:
        expected = _transcript(ref, 30)
    with make_vec(ids, backend="async", seed=3, step_timeout=step_timeout) as venv:
        got = _transcript(venv, 30)
    assert got == expected
    assert any(e for step in got[1:] for e in step[4])  # the faulty env really failed along the way


@pytest.mark.parametrize("step_timeout", [None, 30.0])
def test_declared_envs_skip_the_thread_pool_unless_a_timeout_must_be_enforced(step_timeout: float | None) -> None:
    venv = make_vec([count, faulty, count], backend="async", seed=4, step_timeout=step_timeout)
    assert isinstance(venv, AsyncVecEnv)
    with venv:
        _transcript(venv, 20)
        threads = len(venv._executor._threads)
    # inline: no worker thread was ever started; with a timeout every call goes through the (interruptible) pool
    assert threads == 0 if step_timeout is None else threads >= 1


def test_blocking_api_keeps_working_when_callers_alternate_between_plain_code_and_a_running_loop() -> None:
    act = [r"\boxed{1}"] * 3

    async def inside(venv: Any) -> list[str]:
        return list(venv.step(act).observations)  # the private loop cannot run in this thread now

    with make_vec([sleepy, count, sleepy], backend="async", seed=1) as venv:
        venv.reset(seed=1)
        first = venv.step(act).observations  # no running loop: driven in this thread
        second = asyncio.run(inside(venv))
        third = venv.step(act).observations
    assert [first, second, third] == [["Total 1."] * 3, ["Total 2."] * 3, ["Total 3."] * 3]
