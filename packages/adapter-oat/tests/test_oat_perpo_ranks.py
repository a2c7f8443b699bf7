"""Learner-side PERPO across learner ranks: oat's real strategy (DeepSpeed init over gloo, `all_reduce`) in two
forked processes, each with half of a mixed-env batch, against the single-process result; the reference's
one-env-per-batch normalization formula; and the cross-adapter parity batch through the actor's translation and
the learner's `process_feedback_data` with a 1-rank all-reduce."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from gymverse.curriculum import CurriculumState
from gymverse.perpo import env_normalize, returns_from_lists
from gymverse.rollout import EpisodeBatch
from gymverse.testing.parity import RENDERER, expected_advantages, expected_curriculum, parity_trajectories, report
from gymverse_oat.cli import parse_args
from gymverse_oat.episodes import GymVerseTransition, episode_transitions, record_of
from gymverse_oat.learner import GymVerseLearner

ENVS = ["game:GuessTheNumber", "logic:Nonogram", "algorithm:HiddenGraphShortestPath"]
GAMMA = 0.9


def transition(env_id: str, episode_id: str, turn: int, reward: float, done: bool) -> GymVerseTransition:
    """A transition as the actor sends it (token fields are irrelevant to the statistics)."""
    fields: dict[str, Any] = {"obs": "", "action": "", "prompt": "", "response": "", "prompt_ids": [1]}
    fields |= {"response_ids": [2], "response_logprobs": [-0.5], "response_is_truncated": False}
    fields |= {"action_is_formatted": True, "info": {}}
    return GymVerseTransition(rewards=reward, done=done, env_id=env_id, episode_id=episode_id, turn=turn, **fields)


def make_episodes(seed: int, n: int, envs: list[str]) -> list[list[GymVerseTransition]]:
    """Multi-turn episodes shaped like GymVerse's: format penalties on the way, a success reward at the end."""
    rng = np.random.default_rng(seed)
    episodes = []
    for e in range(n):
        env_id = envs[int(rng.integers(len(envs)))]
        length = int(rng.integers(1, 6))
        rewards = [float(rng.choice([0.0, -0.1], p=[0.8, 0.2])) for _ in range(length)]
        rewards[-1] = float(rng.choice([1.0, 0.0]))
        episodes.append([transition(env_id, f"s{seed}-{e}", k, r, k == length - 1) for k, r in enumerate(rewards)])
    return episodes


def reference_normalize(strategy: Any, returns: list[float]) -> np.ndarray:
    """The reference's formula, as written there: float32 sums all-reduced with oat's strategy, population std."""
    advantages = torch.tensor(returns, dtype=torch.float32)
    local_sum = advantages.sum()
    local_square_sum = (advantages**2).sum()
    local_num = torch.tensor([advantages.numel()], dtype=torch.float32, device=advantages.device)
    global_sum = strategy.all_reduce(local_sum, op="sum")
    global_square_sum = strategy.all_reduce(local_square_sum, op="sum")
    global_num = strategy.all_reduce(local_num, op="sum")
    mean_adv = global_sum / global_num
    std_adv = torch.sqrt(global_square_sum / global_num - mean_adv**2)
    return ((advantages - mean_adv) / (std_adv + 1e-9)).numpy()


def make_learner(flags: list[str], rank: int) -> GymVerseLearner:
    """Our learner with oat's real strategy set up (gloo), without models: what the advantage path needs."""
    from oat.utils.deepspeed import get_strategy

    args = parse_args(flags)
    args.local_rank = -1  # oat then takes LOCAL_RANK from the environment, as under a launcher
    args, strategy = get_strategy(args)
    strategy.setup_distributed()
    learner = GymVerseLearner.__new__(GymVerseLearner)
    learner.args, learner.strategy, learner.actors = args, strategy, []
    learner.curriculum = CurriculumState.from_config(args.curriculum_config())
    learner.pi_buffer, learner.all_buffer, learner.query_step = [], [], 0
    return learner


def rank_main(rank: int, world: int, port: int, episodes: list[list[GymVerseTransition]], scope: str, q: Any) -> None:
    """One learner rank: oat's strategy set up for real, then our learner's `perpo` on this rank's episodes."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    try:
        os.environ.update(
            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank)
        )
        flags = ["--env_id", "|".join(ENVS), "--norm_return", "--norm_scope", scope, "--gamma", str(GAMMA)]
        flags += ["--gpus", "1", "--rollout_batch_size_per_device", "100000", "--rollout_batch_size", "100000"]
        learner = make_learner([*flags, "--pretrain", "unused"], rank)
        strategy = learner.strategy
        kept = learner.perpo(episodes, EpisodeBatch.of([record_of(ep) for ep in episodes]))
        returns = [t.info["returns"] for t in kept]
        q.put((rank, [t.info["advantages"] for t in kept], returns, reference_normalize(strategy, returns).tolist()))
    except BaseException as err:
        q.put((rank, repr(err), None, None))
        raise


def run_ranks(parts: list[list[list[GymVerseTransition]]], scope: str) -> list[tuple[Any, ...]]:
    """Run `rank_main` in one forked process per part; results in rank order."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=rank_main, args=(r, len(parts), port, p, scope, q)) for r, p in enumerate(parts)]
    for p in procs:
        p.start()
    results = sorted(q.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, f"rank process exited with {p.exitcode}: {results}"
    return results


def flat_returns(episodes: list[list[GymVerseTransition]]) -> tuple[np.ndarray, list[str]]:
    rets = returns_from_lists([[t.rewards for t in ep] for ep in episodes], GAMMA)
    return np.array([g for ep in rets for g in ep]), [t.env_id for ep in episodes for t in ep]


def test_two_ranks_equal_single_process_on_mixed_batches() -> None:
    rank0 = make_episodes(0, 14, ENVS)
    rank1 = make_episodes(1, 9, ENVS[:2])  # the third env only on rank 0: statistics still combine exactly
    two = run_ranks([rank0, rank1], "env")
    one = run_ranks([rank0 + rank1], "env")
    g, envs = flat_returns(rank0 + rank1)
    expected = env_normalize(g, envs)  # the core's PERPO on the whole batch in one process
    got_two = np.concatenate([two[0][1], two[1][1]])
    np.testing.assert_allclose(got_two, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(one[0][1], expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.concatenate([two[0][2], two[1][2]]), g)
    # env-level statistics are not the batch's: a mixed batch normalized globally would differ
    assert not np.allclose(got_two, np.concatenate([two[0][3], two[1][3]]), atol=1e-3)
    for env in ENVS:  # each env's advantages have mean 0 and population std 1 across both ranks
        a = got_two[np.array(envs) == env]
        assert abs(a.mean()) < 1e-9 and a.std() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("scope", ["env", "batch"])
def test_one_env_batches_equal_the_reference_formula(scope: str) -> None:
    # the reference's round robin: every rank's batch comes from the same single env
    parts = [make_episodes(2, 10, ENVS[1:2]), make_episodes(3, 7, ENVS[1:2])]
    for _rank, adv, _, reference in run_ranks(parts, scope):
        np.testing.assert_allclose(adv, reference, rtol=2e-5, atol=2e-5)  # the reference sums in float32


def test_batch_scope_is_the_reference_global_normalization_on_mixed_batches() -> None:
    parts = [make_episodes(4, 8, ENVS), make_episodes(5, 8, ENVS)]
    for _rank, adv, _, reference in run_ranks(parts, "batch"):
        np.testing.assert_allclose(adv, reference, rtol=2e-5, atol=2e-5)


def parity_main(port: int, q: Any) -> None:
    """The parity batch: the actor's translation (`episode_transitions`, void episodes dropped), then the
    learner's `process_feedback_data` (curriculum step, PERPO with oat's all-reduce over 1 rank, oat's buffer)."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="1", RANK="0", LOCAL_RANK="0")
        trajs = parity_trajectories()
        envs = "|".join(dict.fromkeys(t.env_id for t in trajs))
        flags = ["--env_id", envs, "--norm_return", "--evolve", "--gpus", "1", "--pretrain", "unused"]
        learner = make_learner([*flags, "--rollout_batch_size_per_device", "1000", "--rollout_batch_size", "1000"], 0)
        recorded: dict[str, list[bool]] = {}
        end_step = learner.curriculum.end_step

        def spy() -> Any:
            for out in learner.curriculum._pending.values():
                recorded.setdefault(out.env_id, []).append(out.success)
            return end_step()

        learner.curriculum.end_step = spy  # type: ignore[method-assign]
        episodes = [episode_transitions(t, RENDERER) for t in trajs]
        learner.process_feedback_data([ep for ep in episodes if ep])
        got = {(t.episode_id, t.turn): t.info["advantages"] for t in learner.pi_buffer}
        q.put(([len(ep) for ep in episodes], got, recorded))
    except BaseException as err:
        q.put(repr(err))
        raise


def test_parity_batch_through_the_learner() -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = ctx.Process(target=parity_main, args=(port, q))
    proc.start()
    result = q.get(timeout=300)
    proc.join(timeout=60)
    assert proc.exitcode == 0 and not isinstance(result, str), result
    counts, got, recorded = result
    trajs = parity_trajectories()
    want = expected_advantages(trajs)
    computed = [np.zeros(len(w)) for w in want]  # per response token: each turn's transition on its tokens
    for i, (traj, n, adv) in enumerate(zip(trajs, counts, want, strict=True)):
        assert traj.tokens is not None
        spans = traj.tokens.turn_spans()
        if not np.any(adv) and traj.error is not None:  # void: no transition, nothing trained or recorded
            assert n == 0, traj.stop_reason
            continue
        assert n == len(spans)
        for k, (start, end) in enumerate(spans):  # each turn's tokens carry the turn's advantage
            np.testing.assert_allclose(adv[start:end], got[(traj.episode_id, k)], atol=1e-6)
            computed[i][start:end] = got[(traj.episode_id, k)]
    report("oat", computed, recorded)  # .ci/compare_parity.py compares the four adapters
    assert {e: sorted(v) for e, v in recorded.items()} == {e: sorted(v) for e, v in expected_curriculum(trajs).items()}
