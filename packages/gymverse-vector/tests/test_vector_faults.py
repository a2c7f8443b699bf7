"""Per-env fault isolation on the sync, async and process backends (Ray: test_vector_ray.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from gymverse import EnvLike
from gymverse.testing import vectest as vt
from gymverse.vector import make_vec

faulty = functools.partial(vt.Faulty)
hang = functools.partial(vt.Hang)
crash = functools.partial(vt.Crash)
count = functools.partial(vt.Count)


def _run(venv: Any, steps: int, seeds: list[int], action_seed: int = 0) -> list[list[tuple[Any, ...]]]:
    """Per-env transcripts: reset observation, then (obs, reward, terminated, truncated, error, final obs).

    The error is the ended episode's or that of a failed reset; a failed autoreset has no final observation, so
    its ``reset_failed`` flag stands in for it.
    """
    rngs = [np.random.default_rng([action_seed, s]) for s in seeds]  # per env, so envs can be dropped
    obs, _ = venv.reset(seed=seeds)
    per_env: list[list[tuple[Any, ...]]] = [[(o,)] for o in obs]
    for _ in range(steps):
        acts = [r"\boxed{" + str(int(rng.integers(1, 4))) + "}" for rng in rngs]
        r = venv.step(acts)
        for i in range(venv.num_envs):
            final = r.infos[i].get("final_info", r.infos[i])
            per_env[i].append(
                (
                    r.observations[i],
                    float(r.rewards[i]),
                    bool(r.terminated[i]),
                    bool(r.truncated[i]),
                    final.get("error") or r.infos[i].get("error"),
                    r.infos[i].get("final_observation") or r.infos[i].get("reset_failed"),
                )
            )
    return per_env


def _errors(transcript: list[tuple[Any, ...]]) -> list[str]:
    return [t[4] for t in transcript[1:] if t[4]]


BACKENDS = [("sync", {}), ("async", {}), ("process", {"num_workers": 2})]


@pytest.mark.parametrize(("backend", "opts"), BACKENDS)
def test_env_raising_in_step_or_reset_ends_only_its_episode(backend: str, opts: dict[str, Any]) -> None:
    ids: list[Callable[[], EnvLike]] = [
        count,
        functools.partial(faulty, fail_rate=0.3, reset_fail_rate=0.3),
        count,
        count,
    ]
    seeds = [10, 11, 12, 13]
    with make_vec(ids, backend=backend, seed=1, backend_options=opts) as venv:
        got = _run(venv, 40, seeds)
    with make_vec([count, count, count], seed=1) as ref:
        expected = _run(ref, 40, [10, 12, 13])
    # healthy envs: exactly the transcript they have without a faulty neighbour
    assert [got[0], got[2], got[3]] == expected
    errors = _errors(got[1])
    assert any(e.startswith("ValueError: injected step failure") for e in errors)
    assert any(e.startswith("OSError: injected reset failure") for e in errors)
    for step in got[1][1:]:
        if step[4] and step[4].startswith("ValueError"):  # a failed step: truncated, never terminated
            assert (step[2], step[3]) == (False, True)
        elif step[4]:  # a failed reset shows on the step that ended the previous episode, or ends its own
            assert step[2] or step[3]


@pytest.mark.parametrize(
    ("backend", "env", "opts"),
    [
        ("sync", hang, {}),
        ("async", functools.partial(hang, hang_seconds=1.0), {"max_workers": 4}),
        ("async", functools.partial(vt.AsyncHang), {}),
        ("process", hang, {"num_workers": 2}),
    ],
    ids=["sync", "async-blocking", "async-native", "process"],
)
def test_hung_env_is_cut_at_step_timeout(backend: str, env: Any, opts: dict[str, Any]) -> None:
    ids = [count, env, count]
    with make_vec(ids, backend=backend, seed=2, step_timeout=0.3, backend_options=opts) as venv:
        got = _run(venv, 5, [20, 21, 22])
        restarts = getattr(venv, "restarts", None)
    with make_vec([count, count], seed=2) as ref:
        expected = _run(ref, 5, [20, 22])
    assert [got[0], got[2]] == expected
    hung = got[1][2]  # hang_at=2: the second step
    assert hung[3] is True
    assert hung[4] is not None
    assert hung[4].startswith("StepTimeout")
    assert hung[0].startswith("Reach ")  # same_step autoreset into a fresh episode
    assert got[1][3][0] == "Total " + got[1][3][0].split()[1]  # and the env keeps working afterwards
    if backend == "process":  # one killed and replaced worker per hang
        assert restarts == len(_errors(got[1]))


def test_sigkilled_worker_loses_only_the_env_that_was_running() -> None:
    ids: list[Callable[[], EnvLike]] = [count, crash, count, count]  # envs 0 and 1 share worker 0
    with make_vec(ids, backend="process", seed=3, backend_options={"num_workers": 2}) as venv:
        pid_before = venv.workers[0].proc.pid  # type: ignore[attr-defined]
        got = _run(venv, 7, [30, 31, 32, 33])
        assert venv.workers[0].proc.pid != pid_before  # type: ignore[attr-defined]
        assert venv.restarts >= 2  # type: ignore[attr-defined]
    with make_vec([count, count, count], seed=3) as ref:
        expected = _run(ref, 7, [30, 32, 33])
    assert [got[0], got[2], got[3]] == expected
    errors = _errors(got[1])
    assert errors
    assert all("WorkerCrashed: worker process died (signal SIGKILL) while running env 1" in e for e in errors)


@pytest.mark.parametrize(("backend", "opts"), BACKENDS)
def test_ten_percent_faulty_envs_over_10k_steps_lose_nothing(backend: str, opts: dict[str, Any]) -> None:
    n, steps = 20, 500
    bad = {3, 14}
    ids = [functools.partial(faulty, fail_rate=0.05, reset_fail_rate=0.05) if i in bad else count for i in range(n)]
    seeds = list(range(100, 100 + n))
    with make_vec(ids, backend=backend, seed=7, backend_options=opts) as venv:
        got = _run(venv, steps, seeds)
    with make_vec(ids, seed=7) as ref:
        expected = _run(ref, steps, seeds)
    assert got == expected  # every env, faulty ones included, matches the sync reference step for step
    healthy_only = [count] * (n - len(bad))
    with make_vec(healthy_only, seed=7) as ref:
        alone = _run(ref, steps, [s for i, s in enumerate(seeds) if i not in bad])
    assert [t for i, t in enumerate(got) if i not in bad] == alone
    for i, transcript in enumerate(got):
        ends = [t for t in transcript[1:] if t[2] or t[3]]
        errored = [t for t in ends if t[4]]
        completed = [t for t in ends if not t[4]]
        assert len(completed) + len(errored) == len(ends)
        assert all(t[5] for t in ends)  # every finished episode kept its final observation
        if i in bad:
            assert errored, f"faulty env {i} never failed in {steps} steps"
        else:
            assert not errored
            assert len(completed) > steps // 15


def test_worker_killed_between_calls_is_replaced_without_blame() -> None:
    import os
    import signal

    with make_vec([count] * 4, backend="process", seed=5, backend_options={"num_workers": 2}) as venv:
        first = _run(venv, 3, [50, 51, 52, 53])
        pid = venv.workers[1].proc.pid  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        venv.workers[1].proc.join(5)  # type: ignore[attr-defined]
        r = venv.step([r"\boxed{1}"] * 4)
        assert venv.restarts == 1  # type: ignore[attr-defined]
    with make_vec([count] * 4, seed=5) as ref:
        expected = _run(ref, 3, [50, 51, 52, 53])
        r_ref = ref.step([r"\boxed{1}"] * 4)
    assert first == expected
    assert r.observations == r_ref.observations  # envs 2 and 3 were rebuilt by replay, nothing was lost
    assert not any("error" in info for info in r.infos)


def test_unpicklable_result_fails_only_its_env_on_the_process_backend() -> None:
    ids: list[Callable[[], EnvLike]] = [count, functools.partial(vt.Unpicklable, bad_at=2), count]
    with make_vec(ids, backend="process", seed=6, backend_options={"num_workers": 1}) as venv:
        got = _run(venv, 3, [60, 61, 62])
    with make_vec([count, count], seed=6) as ref:
        expected = _run(ref, 3, [60, 62])
    assert [got[0], got[2]] == expected
    error = got[1][2][4]
    assert error is not None
    assert error.startswith("TypeError: the env returned an object that cannot be sent to the parent")
