"""The vector API: validation, autoreset modes, subsets, complexity, seeding, and cross-backend equality."""

from __future__ import annotations

from typing import Any

import gymverse
import gymverse.testing.vectest  # registers the vectest: envs
import numpy as np
import pytest
from gymverse.core import StepResult
from gymverse.testing.vectest import Count, Tag
from gymverse.vector import VectorError, make_vec


def _acts(rng: np.random.Generator, n: int) -> list[str]:
    return [r"\boxed{" + str(int(k)) + "}" for k in rng.integers(1, 4, size=n)]


def _transcript(venv: Any, steps: int, seed: int = 0) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    out: list[tuple[Any, ...]] = [tuple(venv.reset(seed=seed)[0])]
    for _ in range(steps):
        r = venv.step(_acts(rng, venv.num_envs))
        out.append(
            (
                tuple(r.observations),
                tuple(r.rewards),
                tuple(r.terminated),
                tuple(r.truncated),
                tuple(i.get("final_observation") for i in r.infos),
            )
        )
    return out


def test_make_vec_rejects_bad_arguments_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown backend 'threads'"):
        make_vec("vectest:Count", 2, backend="threads")
    with pytest.raises(ValueError, match="num_envs is required"):
        make_vec("vectest:Count")
    with pytest.raises(ValueError, match="does not match the 2 env ids"):
        make_vec(["vectest:Count", "vectest:Count"], 3)
    with pytest.raises(ValueError, match="autoreset must be one of"):
        make_vec("vectest:Count", 2, autoreset="always")
    with pytest.raises(LookupError, match="unknown env id 'vectest:Nope'"):
        make_vec("vectest:Nope", 2)
    for backend in ("sync", "async", "process"):  # one check in `VecEnv`, the sync backend included
        with pytest.raises(ValueError, match="step_timeout must be positive seconds, got 0"):
            make_vec("vectest:Count", 2, backend=backend, step_timeout=0)
    with pytest.raises(TypeError, match=r"AsyncVecEnv.__init__\(\) got an unexpected keyword argument 'max_worker'"):
        make_vec("vectest:Count", 2, backend="async", backend_options={"max_worker": 2})
    with make_vec("vectest:Count", 3, seed=0) as venv:
        venv.reset()
        with pytest.raises(ValueError, match="got 2 actions for 3 envs"):
            venv.step(["a", "b"])
        with pytest.raises(IndexError, match=r"\[5\] out of range 0..2"):
            venv.step({5: "a"})
        with pytest.raises(TypeError, match="list of 3 actions or a dict"):
            venv.step("a")
        with pytest.raises(ValueError, match=r"complexity must be in 1\.\.10"):
            venv.set_complexity(11)
        with pytest.raises(ValueError, match="got 2 seeds for 3 envs"):
            venv.reset(seed=[1, 2])
    with pytest.raises(VectorError, match="closed"):
        venv.step(["a", "b", "c"])
    venv.close()  # idempotent


def test_same_step_autoreset_keeps_final_observation_and_info() -> None:
    with make_vec("vectest:Count", 1, seed=3) as venv:
        obs, _ = venv.reset(seed=3)
        target = int(obs[0].split()[1].rstrip("."))
        for _ in range(target - 1):
            r = venv.step([r"\boxed{1}"])
            assert not r.terminated[0]
        r = venv.step([r"\boxed{1}"])
    assert r.terminated[0]
    assert r.rewards[0] == 1.0
    assert r.infos[0]["final_observation"] == f"Total {target}: hit!"
    assert r.infos[0]["final_info"]["success"] is True
    assert r.observations[0].startswith("Reach ")  # already the next episode
    assert r.infos[0]["turn"] == 0


def test_next_step_autoreset_returns_final_obs_then_resets_ignoring_the_action() -> None:
    with make_vec("vectest:Count", 2, seed=5, autoreset="next_step") as venv:
        venv.reset(seed=5)
        ended = None
        for _ in range(40):
            r = venv.step([r"\boxed{3}", r"\boxed{1}"])
            if r.terminated[0]:
                ended = r
                break
        assert ended is not None
        assert "overshot" in ended.observations[0] or "hit" in ended.observations[0]
        nxt = venv.step({0: "ignored text"})
    assert nxt.indices == [0]
    assert nxt.infos[0]["autoreset"] is True
    assert nxt.rewards[0] == 0.0
    assert nxt.observations[0].startswith("Reach ")
    assert not nxt.truncated[0]


def test_disabled_autoreset_refuses_to_step_finished_envs_until_reset() -> None:
    with make_vec("vectest:Count", 2, seed=1, autoreset="disabled") as venv:
        venv.reset(seed=1)
        while True:
            r = venv.step({0: r"\boxed{3}"})
            if r.terminated[0]:
                break
        with pytest.raises(VectorError, match=r"envs \[0\] finished their episode"):
            venv.step([r"\boxed{1}", r"\boxed{1}"])
        venv.step({1: r"\boxed{1}"})  # the other env is still live
        obs, _ = venv.reset(indices=[0])
        assert obs[0].startswith("Reach ")
        venv.step([r"\boxed{1}", r"\boxed{1}"])


def test_dict_actions_step_only_the_named_envs() -> None:
    with make_vec("vectest:Count", 4, seed=0) as venv:
        venv.reset(seed=0)
        r = venv.step({2: r"\boxed{1}", 0: r"\boxed{2}"})
        assert r.indices == [2, 0]
        assert r.observations == ["Total 1.", "Total 2."]
        full = venv.step([r"\boxed{1}"] * 4)
    # envs 1 and 3 were not stepped by the dict call: their first step shows total 1
    assert full.observations[1] == "Total 1."
    assert full.observations[3] == "Total 1."
    assert full.observations[0] == "Total 3."


def test_set_complexity_applies_at_next_reset_for_chosen_indices() -> None:
    with make_vec("game:GuessTheNumber", 3, seed=0) as venv:
        _, infos = venv.reset(seed=0)
        assert [i["upper"] for i in infos] == [10, 10, 10]
        venv.set_complexity(10, indices=[1])
        r = venv.step([r"\boxed{1}"] * 3)
        assert r.infos[1]["complexity"] == 1  # pending: the running episode keeps its level
        _, infos = venv.reset(seed=0)
    assert [i["complexity"] for i in infos] == [1, 10, 1]
    assert infos[1]["upper"] == 5000


def test_seeding_matches_single_env_and_is_deterministic() -> None:
    with make_vec("game:GuessTheNumber", 3, complexity=5) as venv:
        obs, _ = venv.reset(seed=[11, 12, 13])
    for k, seed in enumerate([11, 12, 13]):
        env = gymverse.make("game:GuessTheNumber", complexity=5)
        assert env.reset(seed=seed)[0] == obs[k]
    with make_vec("vectest:Count", 4) as a, make_vec("vectest:Count", 4) as b:
        assert _transcript(a, 60, seed=9) == _transcript(b, 60, seed=9)


class _Recording(Count):
    """Remembers the info dict it returned, to check the vector env hands back that very object."""

    def _step(self, action: str) -> StepResult:
        result = super()._step(action)
        self.last_info = result.info
        return result


@pytest.mark.parametrize("backend", ["sync", "async"])
def test_results_are_not_copied(backend: str) -> None:
    with make_vec(_Recording, 2, backend=backend, seed=0, autoreset="next_step") as venv:
        venv.reset()
        r = venv.step([r"\boxed{1}"] * 2)
        env = venv.slots[0].env  # type: ignore[attr-defined]
        assert r.infos[0] is env.last_info


@pytest.mark.parametrize("backend", ["async", "process"])
def test_backends_match_the_sync_transcript(backend: str) -> None:
    ids = ["vectest:Count", "game:GuessTheNumber", "vectest:SleepIO", "vectest:Count", "vectest:BusyCPU"]
    with make_vec(ids, seed=4) as ref:
        expected = _transcript(ref, 80, seed=4)
    opts = {"num_workers": 2} if backend == "process" else {}
    with make_vec(ids, backend=backend, seed=4, backend_options=opts) as venv:
        assert _transcript(venv, 80, seed=4) == expected


def test_async_backend_runs_inside_a_running_event_loop() -> None:
    import asyncio

    async def main() -> tuple[list[Any], list[Any]]:
        with make_vec("vectest:SleepIO", 8, backend="async", seed=2) as venv:
            obs, _ = await venv.areset(seed=2)  # type: ignore[attr-defined]
            r = await venv.astep([r"\boxed{1}"] * 8)  # type: ignore[attr-defined]
            sync_r = venv.step([r"\boxed{1}"] * 8)  # the blocking API also works from inside a loop
            return list(obs) + r.observations, sync_r.observations

    first, second = asyncio.run(main())
    assert first[8:] == ["Total 1."] * 8
    assert second == ["Total 2."] * 8


@pytest.mark.parametrize("backend", ["sync", "async", "process"])
def test_wrappers_and_env_kwargs_reach_every_backend(backend: str) -> None:
    with make_vec("vectest:Count", 2, backend=backend, wrappers=[Tag], seed=0, complexity=10) as venv:
        obs, infos = venv.reset(seed=0)
        r = venv.step([r"\boxed{1}"] * 2)
    assert all(o.endswith(" [tagged]") for o in obs + r.observations)
    assert [i["complexity"] for i in infos] == [10, 10]
