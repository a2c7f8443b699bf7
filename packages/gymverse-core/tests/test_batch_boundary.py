"""The batch boundary: `EpisodeRecord` / `EpisodeBatch`, the one PERPO entry point, the failure policy, rows."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from gymverse.curriculum import CurriculumOptions, CurriculumState
from gymverse.failures import STOP_REASONS, VOID_STOPS, GenerationError, is_trained
from gymverse.imports import import_object
from gymverse.perpo import GroupStats, advantages, batch_stats, env_normalize, merge, turn_ends_from_mask
from gymverse.rollout import (
    BatchedGenerate,
    EpisodeBatch,
    EpisodeRecord,
    EpisodeSpec,
    Generation,
    InProcessSession,
    PlainRenderer,
    episode_specs,
    run_episode,
)
from gymverse.testing.parity import CASES, expected_advantages, expected_curriculum, parity_trajectories


def rec(env: str, rewards: list[float], ends: list[int], stop: str = "terminated", eid: str = "") -> EpisodeRecord:
    return EpisodeRecord(env, tuple(rewards), tuple(ends), stop, 1, False, eid or f"{env}{rewards}{ends}")


def test_record_round_trips_through_json_and_rejects_malformed() -> None:
    r = EpisodeRecord("game:X", (0.0, 1.0), (3, 9), "terminated", 4, True, "ep-1", 17)
    assert EpisodeRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(ValueError, match="unknown stop reason 'crashed'"):
        EpisodeRecord.from_dict({**r.to_dict(), "stop_reason": "crashed"})
    with pytest.raises(ValueError, match="unknown \\['reward'\\]"):
        EpisodeRecord.from_dict({**r.to_dict(), "reward": 1})
    with pytest.raises(ValueError, match="2 turn ends for 1 turn rewards"):
        EpisodeRecord.from_dict({**r.to_dict(), "turn_rewards": [1.0]})
    with pytest.raises(ValueError, match="seed must be an integer"):
        EpisodeRecord.from_dict({**r.to_dict(), "seed": "17"})
    with pytest.raises(ValueError, match="increasing"):
        EpisodeRecord("a", (0.0, 0.0), (5, 3))


def test_void_rows_train_nothing_and_leave_the_statistics_alone() -> None:
    mask = np.array([[1, 1, 0, 1], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]])
    rows = [rec("a", [0.0, 1.0], [2, 4]), rec("a", [0.0], [1]), rec("a", [5.0], [3], "env_error"), rec("b", [1.0], [2])]
    out = advantages(EpisodeBatch.of(rows, mask))
    without = advantages(EpisodeBatch.of([rows[0], rows[1], rows[3]], mask[[0, 1, 3]]))
    tokens = np.asarray(out.tokens)
    assert not tokens[2].any() and out.turn_advantages[2].tolist() == [0.0]
    np.testing.assert_allclose(tokens[[0, 1, 3]], np.asarray(without.tokens))  # as if the void row were absent
    g = np.array([1.0, 1.0, 0.0])  # env a's turn returns: 0+1, 1, 0
    expect = np.asarray(env_normalize(g, ["a", "a", "a"]))
    assert tokens[0].tolist() == pytest.approx([expect[0], expect[0], 0.0, expect[1]])


def test_a_turn_cut_by_the_framework_is_not_trained_but_its_reward_flows_back() -> None:
    mask = np.array([[1, 1, 0, 0], [1, 0, 0, 0]])
    ends = turn_ends_from_mask(mask, [2, 1])  # row 0's second turn was cut off: no run of 1s for it
    assert ends == [[2, 5], [1]]
    out = advantages(EpisodeBatch.of([rec("a", [0.0, 1.0], ends[0]), rec("a", [0.0], ends[1])], mask))
    # stats over the placed turns only (G = 1 and 0), the cut turn's reward still in the first turn's return
    assert np.asarray(out.tokens)[0, :2].tolist() == pytest.approx([1.0, 1.0], abs=1e-6)
    assert out.turn_advantages[0][1] == 0.0 and out.turn_returns[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="2 model turns but only 1 turns"):
        turn_ends_from_mask(np.array([[1, 0, 1]]), [1])


@pytest.mark.parametrize("with_mask", [True, False])
def test_rank_statistics_merge_to_the_whole_batch(with_mask: bool) -> None:
    rng = np.random.default_rng(0)
    rows, masks = [], []
    for i in range(12):
        turns = int(rng.integers(1, 4))
        ends = [3 * (k + 1) for k in range(turns)]
        rows.append(
            rec("ab"[i % 2], rng.normal(size=turns).round(2).tolist(), ends, ["terminated", "env_error"][i % 5 == 4])
        )
        m = np.zeros(10, dtype=np.int64)
        for e in ends:
            m[e - 2 : e] = 1
        masks.append(m)
    mask = np.stack(masks) if with_mask else None
    whole = advantages(EpisodeBatch.of(rows, mask), gamma=0.9)
    ranks = [slice(0, 5), slice(5, 12)]
    parts = [EpisodeBatch.of(rows[s], None if mask is None else mask[s]) for s in ranks]
    stats = merge(batch_stats(p, gamma=0.9) for p in parts)
    assert isinstance(stats, GroupStats)
    for s, part in zip(ranks, parts):
        local = advantages(part, stats, gamma=0.9)
        for a, b in zip(local.turn_advantages, whole.turn_advantages[s]):
            np.testing.assert_allclose(a, b, atol=1e-9)
        if with_mask:
            np.testing.assert_allclose(np.asarray(local.tokens), np.asarray(whole.tokens)[s], atol=1e-9)
    batch = advantages(EpisodeBatch.of(rows, mask), gamma=0.9, scope="batch")
    assert not np.allclose(np.concatenate(batch.turn_advantages), np.concatenate(whole.turn_advantages))
    with pytest.raises(ValueError, match="scope must be one of"):
        advantages(EpisodeBatch.of(rows, mask), scope="prompt")


def test_torch_masks_keep_their_namespace() -> None:
    torch = pytest.importorskip("torch")
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.float32)
    out = advantages(EpisodeBatch.of([rec("a", [1.0], [2]), rec("a", [0.0], [1])], mask))
    assert isinstance(out.tokens, torch.Tensor) and out.tokens.dtype == torch.float32
    np.testing.assert_allclose(out.tokens.numpy(), [[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], atol=1e-6)


def test_every_stop_reason_has_a_policy() -> None:
    assert {r for r in STOP_REASONS if not is_trained(r)} == VOID_STOPS
    assert is_trained("length") and is_trained("horizon") and not is_trained("generation_aborted")
    with pytest.raises(ValueError, match="unknown stop reason"):
        is_trained("exploded")


def test_parity_batch_covers_the_policy_and_its_expectations() -> None:
    trajs = parity_trajectories()
    assert [t.stop_reason for t in trajs] == [c.stop_reason for c in CASES]
    assert {t.stop_reason for t in trajs} >= {
        "terminated",
        "horizon",
        "length",
        *VOID_STOPS - {"generation_error", "empty_generation"},
    }
    again = parity_trajectories()
    assert [t.to_dict() for t in trajs] == [t.to_dict() for t in again]  # the same episodes every call
    adv = expected_advantages(trajs)
    for t, a in zip(trajs, adv):
        assert len(a) == len(t.tokens.response_ids if t.tokens else [])
        if t.stop_reason in VOID_STOPS:
            assert not a.any(), t.stop_reason
        else:
            assert a.any(), t.stop_reason
    assert expected_curriculum(trajs) == {
        "vectest:Count": [True, False, False, False],
        "vectest:Faulty": [True, False, True],
    }


def _session() -> InProcessSession:
    import gymverse.testing.vectest  # noqa: F401

    return InProcessSession.make("vectest:Count")


def _episode(generate: Any) -> Any:
    async def main() -> Any:
        async with _session() as s:
            return await run_episode(s, generate, renderer=PlainRenderer(), seed=1, episode_id="e")

    return asyncio.run(main())


def test_generation_failures_end_only_their_episode() -> None:
    calls = 0

    async def abort_second(prompt: list[int], cap: int | None) -> Generation:
        nonlocal calls
        calls += 1
        return Generation([], finish_reason="abort") if calls == 2 else Generation(list(b"\\boxed{1}"), None, "stop")

    aborted = _episode(abort_second)
    assert aborted.stop_reason == "generation_aborted" and len(aborted.turns) == 1 and aborted.error

    async def too_long(prompt: list[int], cap: int | None) -> Generation:
        raise GenerationError("This model's maximum context length is 2048 tokens")

    refused = _episode(too_long)
    assert refused.stop_reason == "generation_error" and "maximum context length" in (refused.error or "")

    async def empty(prompt: list[int], cap: int | None) -> Generation:
        return Generation([])

    assert _episode(empty).stop_reason == "empty_generation"

    async def dead(prompt: list[int], cap: int | None) -> Generation:
        raise ConnectionError("inference server is gone")

    with pytest.raises(ConnectionError):  # a dead server is not one episode's failure: it propagates
        _episode(dead)


def test_a_hung_reset_ends_with_reset_error_at_the_reset_timeout() -> None:
    import gymverse.testing.vectest  # noqa: F401
    from gymverse.pool import DEFAULT_RESET_TIMEOUT, DEFAULT_STEP_TIMEOUT, EnvPool

    assert EnvPool().step_timeout == DEFAULT_STEP_TIMEOUT and EnvPool().reset_timeout == DEFAULT_RESET_TIMEOUT

    async def never(prompt: list[int], cap: int | None) -> Generation:
        raise AssertionError("no generation after a failed reset")

    async def main() -> Any:
        with EnvPool(2, reset_timeout=0.5) as pool:
            session = await pool.session("vectest:BadReset", how="hang", hang_seconds=5.0)
            async with session:
                return await run_episode(session, never, renderer=PlainRenderer(), seed=0)

    traj = asyncio.run(main())
    assert traj.stop_reason == "reset_error" and "reset_timeout=0.5" in (traj.error or "")


def test_one_row_scheme() -> None:
    specs = episode_specs(["game:GuessTheNumber", "logic:LatinSquare"], 3, seed=10, complexity=2)
    assert [(s.env_id, s.seed, s.env_index) for s in specs] == [
        ("game:GuessTheNumber", 10, 0),
        ("logic:LatinSquare", 10, 1),
        ("game:GuessTheNumber", 11, 0),
        ("logic:LatinSquare", 11, 1),
        ("game:GuessTheNumber", 12, 0),
        ("logic:LatinSquare", 12, 1),
    ]
    assert all(s.complexity == 2 and s.split == "train" for s in specs)
    row = json.loads(json.dumps(specs[1].to_dict()))
    assert EpisodeSpec.from_dict(row) == specs[1]
    assert EpisodeSpec.from_dict({"env_id": "a:B", "seed": np.int64(4), "complexity": None}).seed == 4
    with pytest.raises(ValueError, match="unknown field\\(s\\) \\['sede'\\]"):
        EpisodeSpec.from_dict({"env_id": "a:B", "sede": 4})
    with pytest.raises(ValueError, match="split must be one of"):
        EpisodeSpec("a:B", 1, None, "validation")
    with pytest.raises(ValueError, match=r"nope:Missing"):
        episode_specs(["nope:Missing"], 1)


def test_curriculum_options_one_name_per_knob() -> None:
    opts = CurriculumOptions.parse({"evolve": "true", "patience": "2", "horizon": "4,8", "eval_level": "null"})
    assert opts.evolve and opts.patience == 2 and opts.eval_level is None and opts.active
    state = CurriculumState.from_config(opts.to_config())
    assert state.controller.promote_patience == 2 and state.episode_config("a:X").max_turns == 4
    assert CurriculumOptions.from_dict(opts.to_dict()) == opts
    with pytest.raises(ValueError, match=r"unknown curriculum option\(s\) \['gymverse\.evolution'\]"):
        CurriculumOptions.parse({"evolution": "true"}, prefix="gymverse.")
    with pytest.raises(ValueError, match="evolve takes true or false"):
        CurriculumOptions.parse({"evolve": "maybe"})
    with pytest.raises(ValueError, match="demote_at < promote_at"):
        CurriculumOptions(promote_at=0.1, demote_at=0.5)
    with pytest.raises(ValueError, match="horizon"):
        CurriculumOptions(horizon="8,x")
    assert not CurriculumOptions(max_turns=5).active


def test_batched_generate_flushes_when_every_episode_waits() -> None:
    sizes: list[int] = []

    def run_batch(prompts: list[list[int]], caps: list[int | None]) -> list[Generation]:
        sizes.append(len(prompts))
        return [Generation([len(p)]) for p in prompts]

    gen = BatchedGenerate(run_batch)

    async def episode(n: int) -> list[int]:
        try:
            return [(await gen([0] * (n + k), None)).token_ids[0] for k in range(n)]
        finally:
            gen.episode_finished()

    async def main() -> list[list[int]]:
        for _ in range(3):  # a rollout announces its episodes before they generate
            gen.episode_started()
        return list(await asyncio.gather(episode(1), episode(2), episode(3)))

    assert asyncio.run(main()) == [[1], [2, 3], [3, 4, 5]]
    assert sizes == [3, 2, 1]  # finished episodes leave the batch

    def broken(prompts: list[list[int]], caps: list[int | None]) -> list[Generation]:
        raise RuntimeError("engine died")

    dead = BatchedGenerate(broken)

    async def one() -> Generation:
        dead.episode_started()
        return await dead([1], None)

    with pytest.raises(RuntimeError, match="engine died"):
        asyncio.run(one())


def test_import_object_names_what_is_missing() -> None:
    assert import_object("gymverse.rollout:EpisodeBatch") is EpisodeBatch
    with pytest.raises(ImportError, match="must look like"):
        import_object("gymverse.rollout.EpisodeBatch")
    with pytest.raises(ImportError, match="has no attribute 'Nope'"):
        import_object("gymverse.rollout:Nope")
    with pytest.raises(ImportError, match="importing 'gymverse_no_such_module' failed"):
        import_object("gymverse_no_such_module:x")


def test_padding_copies_share_their_episode_and_count_once() -> None:
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0]])
    rows = [rec("a", [1.0], [2], eid="e1"), rec("a", [0.0], [1], eid="e2"), rec("a", [0.0], [2], eid="e3")]
    plain = advantages(EpisodeBatch.of(rows, mask[:3]))
    padded = advantages(EpisodeBatch.of([*rows, rows[0]], mask[[0, 1, 2, 0]]))
    np.testing.assert_allclose(np.asarray(padded.tokens)[:3], np.asarray(plain.tokens))  # stats unchanged by the copy
    np.testing.assert_allclose(np.asarray(padded.tokens)[3], np.asarray(plain.tokens)[0])
    stats = batch_stats(EpisodeBatch.of([*rows, rows[0]], mask[[0, 1, 2, 0]]))
    assert stats.count.tolist() == [3.0]
