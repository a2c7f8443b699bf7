"""Cheap (``nonblocking``) envs share one thread hop per loop iteration in `EnvPool` sessions, with containment:
the same transcripts as unbatched play, and a hung or raising env costs only its own episode."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import gymverse
import numpy as np
import pytest
from gymverse.core import StepResult
from gymverse.pool import EnvPool
from gymverse.testing import vectest as vt


class Liar(vt.Count):
    """Declares itself cheap, then hangs in a step (pure Python spinning, or a blocking sleep)."""

    nonblocking = True

    def __init__(self, hang_at: int = 2, how: str = "spin", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hang_at, self.how = hang_at, how

    def _step(self, action: str) -> StepResult:
        if self.turn == self.hang_at:
            end = time.monotonic() + 1.5
            while time.monotonic() < end:  # long past any timeout in these tests, then it gives up
                if self.how == "sleep":
                    time.sleep(0.05)
        return super()._step(action)


@pytest.fixture(autouse=True)
def _liar_registered() -> Iterator[None]:
    """`batchtest:Liar` exists for these tests only (other tests list the registry)."""
    gymverse.register("batchtest:Liar", Liar, override=True)
    yield
    gymverse.registry.deregister("batchtest:Liar")


def _transcript(env_id: str, seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    env = gymverse.make(env_id)
    obs, _ = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs,)]
    for a in actions:
        r = env.step(a)
        out.append((r.observation, r.reward, r.terminated, r.truncated))
        if r.done:
            break
    return out


async def _session_transcript(pool: EnvPool, env_id: str, seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    async with await pool.session(env_id, seed=seed) as s:
        obs, _ = await s.reset()
        out: list[tuple[Any, ...]] = [(obs,)]
        for a in actions:
            r = await s.step(a)
            out.append((r.observation, r.reward, r.terminated, r.truncated))
            if r.terminated or r.truncated:
                break
        return out


def test_64_concurrent_cheap_sessions_play_exactly_their_unbatched_transcripts() -> None:
    rng = np.random.default_rng(0)
    plans = {seed: [rf"\boxed{{{int(a)}}}" for a in rng.integers(1, 4, size=12)] for seed in range(64)}

    async def main() -> list[list[tuple[Any, ...]]]:
        with EnvPool(64) as pool:
            return list(await asyncio.gather(*(_session_transcript(pool, "vectest:Count", s, p)
                                               for s, p in plans.items())))  # fmt: skip

    got = asyncio.run(main())
    assert got == [_transcript("vectest:Count", s, p) for s, p in plans.items()]


@pytest.mark.parametrize("how", ["spin", "sleep"])
def test_a_hung_cheap_env_times_out_alone_and_its_batch_mates_are_not_held(how: str) -> None:
    async def step_timed(session: Any, action: str) -> tuple[Any, float]:
        t0 = time.monotonic()
        result = await session.step(action)
        return result, time.monotonic() - t0

    async def main() -> None:
        with EnvPool(16, step_timeout=0.6) as pool:
            liar = await pool.session("batchtest:Liar", seed=1, how=how)
            mates = [await pool.session("vectest:Count", seed=s) for s in range(8)]
            for s in (liar, *mates):
                await s.reset()
            await asyncio.gather(*(s.step(r"\boxed{1}") for s in (liar, *mates)))  # turn 1: everyone fine
            results = await asyncio.gather(*(step_timed(s, r"\boxed{1}") for s in (liar, *mates)))
            (hung, hung_s), others = results[0], results[1:]
            assert hung.truncated and hung.info["error_type"] == "StepTimeout"
            assert 0.5 < hung_s < 2.0  # its own deadline, counted from when its call started
            assert all(not r.info.get("error") for r, _ in others)
            assert max(t for _, t in others) < 0.6  # released at the spill, not at the hung env's deadline
            again = await asyncio.gather(*(s.step(r"\boxed{1}") for s in mates))  # the pool still has threads
            assert all(not r.info.get("error") for r in again)
            await liar.reset()  # a fresh env replaces the hung one
            assert not (await liar.step(r"\boxed{1}")).info.get("error")
            for s in (liar, *mates):
                await s.close()

    asyncio.run(main())


def test_a_raising_cheap_env_ends_only_its_episode() -> None:
    async def main() -> None:
        with EnvPool(8) as pool:
            bad = await pool.session("vectest:Faulty", seed=3, fail_rate=1.0)
            good = [await pool.session("vectest:Count", seed=s) for s in range(4)]
            for s in (bad, *good):
                await s.reset()
            results = await asyncio.gather(*(s.step(r"\boxed{1}") for s in (bad, *good)))
            assert results[0].truncated and results[0].info["error_type"] == "ValueError"
            assert all(not r.info.get("error") for r in results[1:])

    asyncio.run(main())
