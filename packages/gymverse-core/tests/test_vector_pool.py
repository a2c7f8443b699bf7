"""Episode-level async sessions: `EnvPool` / `PoolSession`."""

from __future__ import annotations

import asyncio
import threading

import gymverse
import gymverse.testing.vectest  # registers the vectest: envs
import pytest
from gymverse.pool import EnvPool, VectorError


async def _play(pool: EnvPool, env_id: str, seed: int, **kwargs: object) -> list[str]:
    """One oracle-free episode that always adds 1: a deterministic transcript."""
    async with await pool.session(env_id, seed=seed, **kwargs) as session:  # type: ignore[arg-type]
        obs, _ = await session.reset()
        out = [obs]
        while True:
            res = await session.step(r"\boxed{1}")
            out.append(res.observation)
            if res.terminated or res.truncated:
                return out


def test_a_step_after_the_pool_closed_is_misuse_not_an_env_failure() -> None:
    async def main() -> None:
        pool = EnvPool(2)
        session = await pool.session("game:GuessTheNumber", seed=1, complexity=2)
        await session.reset()
        pool.close()
        with pytest.raises(VectorError, match="the pool is closed"):
            await session.step(r"\boxed{7}")
        with pytest.raises(VectorError, match="the pool is closed"):
            await session.reset()
        await session.close()  # still frees its slot
        assert pool.active == 0

    asyncio.run(main())


def test_session_transcript_matches_the_plain_env() -> None:
    env = gymverse.make("game:GuessTheNumber", complexity=4)
    env.reset(seed=8)
    expected = [env.step(r"\boxed{7}").observation for _ in range(3)]

    async def main() -> list[str]:
        with EnvPool(4) as pool:
            session = await pool.session("game:GuessTheNumber", seed=8, complexity=4)
            await session.reset()
            got = [(await session.step(r"\boxed{7}")).observation for _ in range(3)]
            await session.close()
            await session.close()  # idempotent
            with pytest.raises(VectorError, match="closed"):
                await session.step("x")
            return got

    assert asyncio.run(main()) == expected


def test_native_async_and_blocking_envs_give_the_same_episode() -> None:
    async def main() -> tuple[list[str], list[str]]:
        with EnvPool(8) as pool:
            return await asyncio.gather(_play(pool, "vectest:SleepIO", 5), _play(pool, "vectest:Count", 5))

    native, blocking = asyncio.run(main())
    assert native == blocking


def test_pool_bounds_open_sessions() -> None:
    async def main() -> list[str]:
        events: list[str] = []
        with EnvPool(2) as pool:
            a = await pool.session("vectest:Count", seed=1)
            b = await pool.session("vectest:Count", seed=2)
            assert pool.active == 2

            async def third() -> None:
                c = await pool.session("vectest:Count", seed=3)
                events.append("third opened")
                await c.close()

            task = asyncio.create_task(third())
            await asyncio.sleep(0.05)
            events.append("still waiting" if not task.done() else "did not wait")
            await a.close()
            await task
            await b.close()
            assert pool.active == 0
        return events

    assert asyncio.run(main()) == ["still waiting", "third opened"]


def test_pool_serves_event_loops_in_several_threads_at_once() -> None:
    pool = EnvPool(3)
    results: dict[int, list[list[str]]] = {}

    def worker(k: int) -> None:
        async def main() -> list[list[str]]:
            return list(await asyncio.gather(*(_play(pool, "vectest:SleepIO", 10 * k + j) for j in range(4))))

        results[k] = asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    pool.close()
    assert sorted(results) == [0, 1, 2]
    reference = asyncio.run(_solo_reference())
    assert results[2][3] == reference
    assert pool.active == 0


async def _solo_reference() -> list[str]:
    with EnvPool(1) as pool:
        return await _play(pool, "vectest:SleepIO", 23)


@pytest.mark.parametrize("env_id", ["vectest:Faulty", "vectest:AsyncHang"])
def test_session_contains_env_failures(env_id: str) -> None:
    async def main() -> list[object]:
        with EnvPool(2, step_timeout=0.3) as pool:
            kwargs = {"fail_rate": 1.0} if env_id == "vectest:Faulty" else {"hang_at": 1}
            session = await pool.session(env_id, seed=0, **kwargs)
            await session.reset()
            res = await session.step(r"\boxed{1}")
            with pytest.raises(VectorError, match="episode is over"):
                await session.step(r"\boxed{1}")
            obs, _ = await session.reset()  # a fresh env
            await session.close()
            return [res.truncated, res.terminated, res.info["error"], obs]

    truncated, terminated, error, obs = asyncio.run(main())
    assert truncated is True
    assert terminated is False
    assert str(error).startswith("ValueError: injected" if env_id == "vectest:Faulty" else "StepTimeout")
    assert str(obs).startswith("Reach ")


def test_unknown_env_and_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be >= 1"):
        EnvPool(0)

    async def main() -> None:
        with EnvPool(1) as pool:
            with pytest.raises(LookupError, match="unknown env id"):
                await pool.session("vectest:Missing")
            with pytest.raises(ValueError, match="complexity must be"):
                await pool.session("vectest:Count", complexity=0)
            assert pool.active == 0  # failed opens took no permit

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # Python 3.12+
def test_a_forked_child_gets_its_own_shared_pool() -> None:
    # A launcher that opened sessions and then forks (launchpad, multiprocessing "fork") must not hand the child a
    # pool whose worker threads exist only in the parent: the child's episodes would wait forever.
    import multiprocessing

    from gymverse.pool import shared_pool
    from gymverse.rollout import open_session

    async def one_reset() -> str:
        import gymverse.testing.vectest  # noqa: F401

        async with await open_session("vectest:Count", seed=1) as session:
            obs, _ = await session.reset(seed=1)
            return obs

    parent = asyncio.run(one_reset())
    assert shared_pool()._runner is not None  # the parent's pool exists and has run a call
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as workers:
        child = workers.apply_async(_reset_in_child).get(timeout=60)
    assert child == parent


def _reset_in_child() -> str:
    async def one_reset() -> str:
        from gymverse.rollout import open_session

        async with await open_session("vectest:Count", seed=1) as session:
            obs, _ = await session.reset(seed=1)
            return obs

    return asyncio.run(one_reset())


def test_replace_closes_the_shared_pool_and_applies_new_limits() -> None:
    from gymverse.pool import configure_shared_pool, shared_pool

    old = shared_pool()
    limits = (old.max_concurrency, old.step_timeout, old.reset_timeout)
    with pytest.raises(RuntimeError, match="cannot be reconfigured"):
        configure_shared_pool(old.max_concurrency + 3)
    configure_shared_pool(old.max_concurrency + 3, replace=True)
    new = shared_pool()
    assert old.closed and new is not old and new.max_concurrency == limits[0] + 3
    configure_shared_pool(limits[0], step_timeout=limits[1], reset_timeout=limits[2], replace=True)
    assert shared_pool().max_concurrency == limits[0]
