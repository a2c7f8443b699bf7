"""The Ray backend: same transcripts as sync, and raise / SIGKILL / hang containment with actor replacement."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymverse import EnvLike
from gymverse.testing import vectest as vt
from gymverse.vector import make_vec

count = functools.partial(vt.Count)


def _run(venv: Any, steps: int, seeds: list[int]) -> list[list[tuple[Any, ...]]]:
    rngs = [np.random.default_rng([1, s]) for s in seeds]
    obs, _ = venv.reset(seed=seeds)
    out: list[list[tuple[Any, ...]]] = [[(o,)] for o in obs]
    for _ in range(steps):
        r = venv.step([r"\boxed{" + str(int(rng.integers(1, 4))) + "}" for rng in rngs])
        for i in range(venv.num_envs):
            err = r.infos[i].get("final_info", {}).get("error")
            out[i].append((r.observations[i], float(r.rewards[i]), bool(r.terminated[i]), bool(r.truncated[i]), err))
    return out


@pytest.mark.usefixtures("ray_session")
def test_ray_backend_contains_raise_crash_and_hang() -> None:
    ids: list[Callable[[], EnvLike]] = [
        count,
        functools.partial(vt.Crash, crash_at=2),
        count,
        functools.partial(vt.Faulty, fail_rate=1.0),
        functools.partial(vt.Hang, hang_at=2),
        count,
    ]
    seeds = [40, 41, 42, 43, 44, 45]
    with make_vec(ids, backend="ray", seed=4, step_timeout=1.0, backend_options={"num_workers": 2}) as venv:
        got = _run(venv, 3, seeds)  # step 2: env 1 kills its actor, env 4 hangs; both exactly once
        restarts = venv.restarts  # type: ignore[attr-defined]
        venv.set_complexity(10, indices=[0])
        _, infos = venv.reset(seed=7, indices=[0])
        partial = venv.step({2: r"\boxed{1}"})
    healthy = [0, 2, 5]
    with make_vec([count] * 3, seed=4) as ref:
        expected = _run(ref, 3, [seeds[i] for i in healthy])
    assert [got[i] for i in healthy] == expected
    crash_errors = [t[4] for t in got[1][1:] if t[4]]
    hang_errors = [t[4] for t in got[4][1:] if t[4]]
    raise_errors = [t[4] for t in got[3][1:] if t[4]]
    assert [e.split(":")[0] for e in crash_errors] == ["WorkerCrashed"]
    assert crash_errors[0].startswith("WorkerCrashed: Ray actor died while running env 1")
    assert hang_errors == ["StepTimeout: env 4 exceeded step_timeout=1.0s"]
    assert len(raise_errors) == 3
    assert all(e.startswith("ValueError: injected step failure") for e in raise_errors)
    assert restarts == 2
    assert infos[0]["complexity"] == 10
    assert partial.indices == [2]


@pytest.mark.usefixtures("ray_session")
def test_ray_winning_step_survives_a_crashing_autoreset() -> None:
    # issue 19: the same_step reset is its own supervised call, so an actor dying in it keeps the final reward
    bad = functools.partial(vt.BadReset, how="crash")
    with make_vec([bad, count], backend="ray", seed=3, backend_options={"num_workers": 2}) as venv:
        venv.reset(seed=[3, 4])
        result = venv.step([r"\boxed{1}", r"\boxed{1}"])
    assert float(result.rewards[0]) == 1.0 and bool(result.terminated[0])
    assert result.infos[0]["final_info"]["success"] is True
    assert result.infos[0]["reset_failed"] is True
    assert result.infos[0]["error_type"] == "WorkerCrashed"


def _ping_for(ray: Any, actor: Any, seconds: float) -> None:
    """Call `actor` until `seconds` pass (raising what a call raises): `ray.kill` is asynchronous, so a call
    sent before the kill has landed may still be answered."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ray.get(actor.ping.remote(), timeout=30)
        time.sleep(0.1)


def test_ray_actors_started_before_a_failed_start_are_killed(ray_session: Any, monkeypatch: Any) -> None:
    from gymverse.vector.ray_backend import RayVecEnv

    started: list[Any] = []
    start = RayVecEnv._start

    def fails_third_start(self: RayVecEnv, block: list[int]) -> Any:
        if len(started) == 2:
            raise RuntimeError("injected actor start failure")
        started.append(start(self, block))
        return started[-1]

    monkeypatch.setattr(RayVecEnv, "_start", fails_third_start)
    with pytest.raises(RuntimeError, match="injected actor start failure"):
        make_vec([count] * 3, backend="ray", seed=1, backend_options={"num_workers": 3})
    assert len(started) == 2
    for actor in started:  # killed, not leaked: a call to it fails with the actor's death, within 30 s
        with pytest.raises(ray_session.exceptions.RayActorError):
            _ping_for(ray_session, actor, seconds=30)
