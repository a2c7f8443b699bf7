"""The Ray backend: same transcripts as sync, and raise / SIGKILL / hang containment with actor replacement."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import gymverse
import gymverse.vector.testing  # noqa: F401 - registers vectest:*
from gymverse.vector import make_vec

count = functools.partial(gymverse.make, "vectest:Count")


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
    ids = [
        count,
        functools.partial(gymverse.make, "vectest:Crash", crash_at=3),
        count,
        functools.partial(gymverse.make, "vectest:Faulty", fail_rate=0.3),
        functools.partial(gymverse.make, "vectest:Hang", hang_at=4),
        count,
    ]
    seeds = [40, 41, 42, 43, 44, 45]
    with make_vec(ids, backend="ray", seed=4, step_timeout=1.0, backend_options={"num_workers": 2}) as venv:
        got = _run(venv, 6, seeds)
        restarts = venv.restarts  # type: ignore[attr-defined]
        venv.set_complexity(10, indices=[0])
        obs, infos = venv.reset(seed=7, indices=[0])
        partial = venv.step({2: r"\boxed{1}"})
    healthy = [0, 2, 5]
    with make_vec([count] * 3, seed=4) as ref:
        expected = _run(ref, 6, [seeds[i] for i in healthy])
    assert [got[i] for i in healthy] == expected
    crash_errors = [t[4] for t in got[1][1:] if t[4]]
    hang_errors = [t[4] for t in got[4][1:] if t[4]]
    raise_errors = [t[4] for t in got[3][1:] if t[4]]
    assert crash_errors
    assert all(e.startswith("WorkerCrashed: Ray actor died while running env 1") for e in crash_errors)
    assert hang_errors == ["StepTimeout: env 4 exceeded step_timeout=1.0s"]
    assert raise_errors
    assert all(e.startswith("ValueError: injected step failure") for e in raise_errors)
    assert restarts == len(crash_errors) + len(hang_errors)
    assert infos[0]["complexity"] == 10
    assert partial.indices == [2]
