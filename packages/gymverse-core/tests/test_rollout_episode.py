"""`run_episode` end to end: pool and in-process sessions, curriculum levels and horizon, budgets, errors."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from gymverse.curriculum import ComplexityController, CurriculumState, StepwiseHorizon
from gymverse.pool import EnvPool, PoolSession, configure_shared_pool, shared_pool
from gymverse.rollout import (
    Generation,
    InProcessSession,
    PlainRenderer,
    RolloutCollector,
    Session,
    open_session,
    run_episode,
    text_generate,
)
from gymverse.trajectory import EpisodeTokens
from hypothesis import given, settings
from hypothesis import strategies as st

GUESS = "game:GuessTheNumber"
RENDERER = PlainRenderer()


async def bisect(text: str) -> str:
    lo, hi = map(int, re.search(r"between (\d+) and (\d+)", text).groups())  # type: ignore[union-attr]
    for v, word in re.findall(r"(\d+) is too (low|high)", text):
        lo, hi = (int(v) + 1, hi) if word == "low" else (lo, int(v) - 1)
    return r"\boxed{" + str((lo + hi) // 2) + "}"


async def always_one(text: str) -> str:
    return r"\boxed{1}"


async def pool_sessions(n: int) -> list[Session]:
    return [await open_session(GUESS) for _ in range(n)]


@pytest.mark.parametrize("kind", ["pool", "in_process"])
def test_sessions_through_run_episode_with_controller_and_horizon_schedule(kind: str) -> None:
    """Both session kinds: levels from the controller land on the env, the horizon schedule caps the turns."""
    curriculum = CurriculumState(
        ComplexityController(promote_patience=1), StepwiseHorizon(rounds=[3, 6, 12], interval=2), eval_level=1
    )
    col = RolloutCollector(text_generate(bisect, RENDERER), curriculum=curriculum)

    async def main() -> list[list[Any]]:
        sessions: list[Session]
        if kind == "pool":
            sessions = await pool_sessions(4)
            assert all(isinstance(s, PoolSession) for s in sessions)
        else:
            sessions = [InProcessSession.make(GUESS) for _ in range(4)]
        steps = []
        for step in range(6):
            wanted.append(curriculum.controller.level(GUESS))
            steps.append(await col.collect(sessions, seeds=[10 * step + i for i in range(4)]))
        steps.append(await col.collect(sessions, seeds=[100, 101, 102, 103], validation=True))
        for s in sessions:
            await s.close()
        return steps

    wanted: list[int] = []
    steps = asyncio.run(main())
    caps = [3, 3, 6, 6, 12, 12]
    ranges: dict[int, set[int]] = {}
    for step, (trajs, cap) in enumerate(zip(steps, caps)):
        for t in trajs:
            assert t.metrics["horizon"] == cap and len(t.turns) <= cap
            assert t.error is None and t.tokens is not None
            assert len(t.tokens.turn_ends) == len(t.turns)
            assert t.complexity == wanted[step]  # the controller's level, in effect at the reset
            hi = int(re.search(r"between 1 and (\d+)", t.turns[0].observation).group(1))  # type: ignore[union-attr]
            ranges.setdefault(t.complexity, set()).add(hi)
            if t.success:
                assert t.stop_reason == "terminated"
            else:
                assert t.stop_reason == "horizon" and len(t.turns) == cap
    assert wanted[0] == 1 and max(wanted) > 1  # promoted while bisection kept succeeding
    his = [max(ranges[lvl]) for lvl in sorted(ranges)]
    assert his == sorted(his) and len(set(his)) == len(his)  # a higher level really is a wider range
    # validation episodes run at the fixed evaluation level and do not move the curriculum
    before = curriculum.state_dict()
    assert {t.complexity for t in steps[6]} == {1}
    assert curriculum.state_dict() == before


def test_shared_pool_is_configured_once_and_bad_envs_fail_their_episode() -> None:
    pool = shared_pool()
    assert shared_pool() is pool
    configure_shared_pool(pool.max_concurrency, step_timeout=pool.step_timeout)  # same limits: fine
    with pytest.raises(RuntimeError, match="cannot be reconfigured"):
        configure_shared_pool(pool.max_concurrency + 1)

    async def main() -> Any:
        session = await open_session("nope:Missing")
        async with session:
            return await run_episode(session, text_generate(always_one, RENDERER), renderer=RENDERER)

    traj = asyncio.run(main())
    assert traj.stop_reason == "reset_error" and "nope:Missing" in (traj.error or "")
    assert traj.turns == [] and traj.tokens is not None and traj.tokens.response_ids == []


def test_token_budget_per_turn_cap_and_empty_generation() -> None:
    seen: list[int | None] = []

    async def chatty(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        seen.append(max_tokens)
        ids = list(b"\\boxed{1} and a long explanation")
        return Generation(ids, [-1.0] * len(ids))

    async def main() -> Any:
        async with InProcessSession.make(GUESS) as s:
            capped = await run_episode(
                s, chatty, renderer=RENDERER, seed=3, max_response_tokens=120, max_tokens_per_turn=12
            )
        async with InProcessSession.make(GUESS) as s:

            async def silent(prompt_ids: list[int], max_tokens: int | None) -> Generation:
                return Generation([])

            empty = await run_episode(s, silent, renderer=RENDERER, seed=3)
        return capped, empty

    capped, empty = asyncio.run(main())
    tok = capped.tokens
    assert capped.stop_reason == "length" and capped.truncated
    assert len(tok.response_ids) <= 120 and max(n for n in seen if n is not None) <= 12
    assert all(tok.turn_ends[k] - (tok.turn_ends[k - 1] if k else 0) >= 12 for k in range(len(tok.turn_ends)))
    assert capped.turns[0].action == r"\boxed{1} an"  # 12 bytes: what the model produced is what the env got
    # the last reply was cut by the budget mid-answer: the env's parser counts it as a format error
    assert capped.metrics["format_errors"] == sum("}" not in t.action for t in capped.turns) >= 1
    assert capped.turns[-1].info["format_error"] and capped.turns[-1].reward < 0
    assert empty.stop_reason == "empty_generation" and empty.turns == []


def test_generation_failures_propagate() -> None:
    async def down(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        raise ConnectionError("inference server gone")

    async def main() -> Any:
        async with InProcessSession.make(GUESS) as s:
            return await run_episode(s, down, renderer=RENDERER)

    with pytest.raises(ConnectionError, match="inference server gone"):
        asyncio.run(main())


def test_pool_session_set_complexity_reaches_the_env() -> None:
    async def main() -> tuple[int, int]:
        with EnvPool(2) as pool:
            s = await pool.session(GUESS)
            s.set_complexity(4)
            _, info = await s.reset(seed=1)
            with pytest.raises(ValueError, match="complexity"):
                s.set_complexity(11)
            await s.close()
            await s.close()  # idempotent, async like every session's close
            return info["complexity"], pool.active

    assert asyncio.run(main()) == (4, 0)


def _spans_by_walking(mask: list[Any], ends: list[int]) -> list[tuple[int, int]]:
    """The definition of `EpisodeTokens.turn_spans`: walk back from each end over the run of 1s."""
    spans = []
    for end in ends:
        start = min(end, len(mask))
        while start > 0 and mask[start - 1] == 1:
            start -= 1
        spans.append((start, end))
    return spans


@settings(max_examples=300, deadline=None)
@given(
    mask=st.lists(st.sampled_from([0, 1, 1, 2, True, False, 1.0, -1]), max_size=40),
    ends=st.lists(st.integers(0, 45), max_size=6),
)
def test_turn_spans_are_the_runs_of_ones_ending_at_each_end(mask: list[Any], ends: list[int]) -> None:
    tokens = EpisodeTokens(response_ids=[7] * len(mask), response_mask=mask, turn_ends=sorted(ends))
    assert tokens.turn_spans() == _spans_by_walking(mask, sorted(ends))


async def no_answer(text: str) -> str:
    return "thinking..."  # a format error every turn: the episode can only end at a cap


@pytest.mark.parametrize(
    ("env_cap", "run_cap", "reason", "turns"),
    [(3, 5, "truncated", 3), (5, 3, "horizon", 3), (4, 4, "truncated", 4), (None, 2, "horizon", 2)],
)
@pytest.mark.parametrize("kind", ["pool", "in_process"])
def test_the_env_cap_and_the_run_cap_each_end_the_episode_the_smaller_wins(
    kind: str, env_cap: int | None, run_cap: int, reason: str, turns: int
) -> None:
    """The env's `max_turns` ends it as ``truncated``, the run's `horizon` as ``horizon``; a tie is the env's."""
    kw: dict[str, Any] = {} if env_cap is None else {"max_turns": env_cap}

    async def main() -> Any:
        session = await open_session(GUESS, **kw) if kind == "pool" else InProcessSession.make(GUESS, **kw)
        async with session:
            return await run_episode(session, text_generate(no_answer, RENDERER), renderer=RENDERER, horizon=run_cap)

    traj = asyncio.run(main())
    assert (traj.stop_reason, len(traj.turns), traj.truncated, traj.success) == (reason, turns, True, False)
    assert traj.metrics.get("horizon_truncated", False) is (reason == "horizon")
    tok = traj.tokens
    assert tok is not None and len(tok.turn_ends) == turns
    # the episode ended on the model's last reply: no observation after it is in the trained sequence
    assert tok.turn_ends[-1] == len(tok.response_ids)
    if reason == "truncated":
        assert "Turn limit of" in traj.final_observation


def test_the_run_cap_is_reported_when_the_token_budget_would_also_end_that_turn() -> None:
    """A horizon cut ends the episode on the model's reply, before the observation could overflow the budget."""

    async def main(horizon: int | None, budget: int | None) -> Any:
        async with InProcessSession.make(GUESS) as s:
            gen = text_generate(no_answer, RENDERER)
            return await run_episode(s, gen, renderer=RENDERER, seed=1, horizon=horizon, max_response_tokens=budget)

    free = asyncio.run(main(2, None))
    assert free.tokens is not None
    room = free.tokens.turn_ends[-1] + 1  # both replies fit; the observation after the second one would not
    assert asyncio.run(main(None, room)).stop_reason == "length"  # without the run's cap, the budget ends it
    capped = asyncio.run(main(2, room))
    assert (capped.stop_reason, len(capped.turns)) == ("horizon", 2)
