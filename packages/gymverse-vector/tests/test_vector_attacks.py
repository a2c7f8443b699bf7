"""Faulty envs from the security review (issue 19) on every backend: each failure stays with its own env."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import pytest
from gymverse.core import SUCCESS_REWARD
from gymverse.testing import vectest as vt
from gymverse.vector import EnvPool, make_vec
from gymverse.vector.out_of_process import OutOfProcessVecEnv

count = functools.partial(vt.Count)
BACKENDS = [("sync", {}), ("async", {}), ("process", {"num_workers": 1}), ("ray", {"num_workers": 1})]
HOSTED = [b for b in BACKENDS if b[0] in ("process", "ray")]


@pytest.fixture(autouse=True)
def _ray_runtime(request: pytest.FixtureRequest) -> None:
    """The shared local Ray runtime, for the cases that run on the ray backend."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "ray":
        request.getfixturevalue("ray_session")


def _bad_reset(how: str) -> Any:
    return functools.partial(vt.BadReset, how=how, hang_seconds=5.0)


@pytest.mark.parametrize("how", ["crash", "hang", "raise"])
@pytest.mark.parametrize(("backend", "opts"), BACKENDS)
def test_winning_step_survives_a_failing_autoreset(backend: str, opts: dict[str, Any], how: str) -> None:
    if how == "hang" and backend == "sync":
        pytest.skip("the sync backend interrupts hangs with SIGALRM, covered by the tests of the sync backend")
    timeout = 1.0 if how == "hang" else None
    with make_vec(
        [_bad_reset(how), count], backend=backend, seed=3, step_timeout=timeout, backend_options=opts
    ) as venv:
        venv.reset(seed=[3, 4])
        result = venv.step([r"\boxed{1}", r"\boxed{1}"])
    info = result.infos[0]
    assert float(result.rewards[0]) == SUCCESS_REWARD  # the reward of the winning step is kept
    assert bool(result.terminated[0]) and not bool(result.truncated[0])
    assert info["final_info"]["success"] is True
    assert info["reset_failed"] is True  # and the failed reset is reported, on its own env
    assert info["error_type"] in ("WorkerCrashed", "StepTimeout", "RuntimeError")
    assert "error" not in result.infos[1] and "error" not in result.infos[1].get("final_info", {})


@pytest.mark.parametrize("how", ["crash", "hang"])
@pytest.mark.parametrize(("backend", "opts"), HOSTED)
def test_env_that_cannot_reset_is_quarantined_not_retried_forever(backend: str, opts: dict[str, Any], how: str) -> None:
    timeout = 1.0 if how == "hang" else None
    with make_vec(
        [_bad_reset(how), count], backend=backend, seed=3, step_timeout=timeout, backend_options=opts
    ) as venv:
        venv.reset(seed=[3, 4])
        start = time.monotonic()
        results = [venv.step([r"\boxed{1}", r"\boxed{1}"]) for _ in range(8)]
        elapsed = time.monotonic() - start
        assert isinstance(venv, OutOfProcessVecEnv)
        restarts = venv.restarts
        quarantined = dict(venv.quarantined)
    assert 0 in quarantined and 1 not in quarantined
    assert restarts <= 4  # one per failed reset until quarantine, then none (it used to loop forever)
    assert results[-1].infos[0]["error_type"] == "Quarantined"
    assert elapsed < 60
    with make_vec(
        [_bad_reset(how), count], backend=backend, seed=3, step_timeout=timeout, backend_options=opts
    ) as venv:
        venv.reset(seed=[3, 4])
        for _ in range(8):
            venv.step([r"\boxed{1}", r"\boxed{1}"])
        assert isinstance(venv, OutOfProcessVecEnv) and 0 in venv.quarantined
        _obs, infos = venv.reset(seed=[3, 4])  # an explicit reset gives it another chance, with its good seed
        assert 0 not in venv.quarantined and "error" not in infos[0]


@pytest.mark.parametrize("how", ["arity", "none", "string-reward", "nan", "parent-unpickle"])
@pytest.mark.parametrize(("backend", "opts"), BACKENDS)
def test_malformed_step_results_are_contained_per_env(backend: str, opts: dict[str, Any], how: str) -> None:
    if how == "parent-unpickle" and backend not in ("process", "ray"):
        pytest.skip("only the process and ray backends move results between processes")
    bad = functools.partial(vt.BadStep, how=how)
    with make_vec([bad, count], backend=backend, seed=5, backend_options=opts) as venv:
        venv.reset(seed=[5, 6])
        with make_vec([count], seed=6) as ref:
            ref.reset(seed=[6])
            expected = ref.step([r"\boxed{1}"])
        result = venv.step([r"\boxed{1}", r"\boxed{1}"])  # used to raise for the whole batch
        again = venv.step([r"\boxed{1}", r"\boxed{2}"])  # and the env that failed starts a new episode
    info = result.infos[0].get("final_info", result.infos[0])
    assert bool(result.truncated[0]) and float(result.rewards[0]) == 0.0
    assert info["error_type"] in ("TypeError", "ValueError")
    if how == "nan":
        assert "non-finite reward" in info["error"]
    assert result.observations[1] == expected.observations[0]  # the healthy neighbour is untouched
    assert float(result.rewards[1]) == float(expected.rewards[0])
    assert len(again.observations) == 2


def test_hung_resets_do_not_starve_or_blame_healthy_sessions() -> None:
    # Four sessions whose reset hangs fill all four threads; four healthy sessions reset at the same time.
    async def main() -> list[dict[str, Any]]:
        with EnvPool(max_concurrency=8, max_workers=4, step_timeout=1.0, reset_timeout=1.0) as pool:
            hung = [await pool.session("vectest:BadReset", how="hang", hang_seconds=5.0) for _ in range(4)]
            for session in hung:
                await session.reset(seed=3)  # its one good seed
            healthy = [await pool.session("vectest:Count", seed=10 + i) for i in range(4)]
            outcomes = await asyncio.gather(*(s.reset() for s in hung), *(s.reset() for s in healthy))
            again = await asyncio.gather(*(s.reset() for s in healthy))  # the pool still has threads for them
            return [o[1] for o in [*outcomes, *again]]

    start = time.monotonic()
    infos = asyncio.run(main())
    assert all(info.get("error_type") == "StepTimeout" for info in infos[:4])  # blame on the hung envs
    assert all("error" not in info for info in infos[4:]), infos[4:]
    assert time.monotonic() - start < 15
