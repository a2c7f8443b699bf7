"""Built-in algorithm-domain envs: oracle solvability, determinism, format errors, baselines and golden rules."""

from __future__ import annotations

import gymverse
import pytest
from gymverse.core import StepResult
from gymverse.envs._contract_testing import (
    check_baseline_fails,
    check_clone_and_state_replay,
    check_levels_change_instances_and_horizon,
    check_malformed_actions,
    check_oracle_solves,
    check_random_actions_handled,
    check_same_seed_same_transcript,
    check_wrong_answer_ends_episode,
)
from gymverse.envs.algorithm.array_peak import HiddenArrayPeak
from gymverse.envs.algorithm.interval_schedule import IntervalScheduling, greedy_schedule
from gymverse.envs.algorithm.shortest_path import HiddenGraphShortestPath, dijkstra
from gymverse.envs.algorithm.topo_schedule import TopologicalSchedule, topo_order

IDS = [
    "algorithm:HiddenGraphShortestPath",
    "algorithm:HiddenArrayPeak",
    "algorithm:TopologicalSchedule",
    "algorithm:IntervalScheduling",
]
LEVELS = [1, 5, 10]
SEEDS = [0, 1, 2, 3]
#: A well-formed but certainly wrong final answer for each env, from its hidden state.
WRONG_ANSWER = {
    IDS[0]: lambda e: rf"\boxed{{submit {e.answer + 1}}}",
    IDS[1]: lambda e: rf"\boxed{{submit {e.peak - 1}}}",
    IDS[2]: lambda e: rf"\boxed{{submit {e.goal}}}",
    IDS[3]: lambda e: rf"\boxed{{submit {greedy_schedule(e.intervals)[0]}}}",
}
BAD_INT = {
    IDS[0]: r"\boxed{neighbors two}",
    IDS[1]: r"\boxed{compare 1 x}",
    IDS[2]: r"\boxed{deps 1.5}",
    IDS[3]: r"\boxed{first_end soon}",
}


def test_ids_registered_with_domain() -> None:
    assert set(IDS) <= set(gymverse.list_envs("algorithm"))
    for env_id in IDS:
        env = gymverse.make(env_id)
        assert env.metadata.domain == "algorithm"
        assert env.metadata.family == "algorithm"
        assert env.metadata.name == env_id.split(":")[1]


@pytest.mark.parametrize("env_id", IDS)
def test_random_actions_are_well_formed_and_handled(env_id: str) -> None:
    check_random_actions_handled(env_id)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("env_id", IDS)
def test_oracle_succeeds(env_id: str, level: int) -> None:
    for seed in SEEDS:
        steps = check_oracle_solves(gymverse.make(env_id, complexity=level), seed)
        assert steps[-1].terminated
        assert not steps[-1].truncated
        assert all(s.reward == 0.0 for s in steps[:-1])


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_transcript(env_id: str) -> None:
    check_same_seed_same_transcript(env_id, LEVELS)


@pytest.mark.parametrize("env_id", IDS)
def test_levels_change_instances_and_horizon(env_id: str) -> None:
    check_levels_change_instances_and_horizon(env_id)


@pytest.mark.parametrize("env_id", IDS)
def test_malformed_actions_are_format_errors(env_id: str) -> None:
    bad = [
        "neighbors 3",  # no box
        r"\boxed{submit 3",  # unbalanced
        r"\boxed{teleport 3}",
        r"\boxed{submit}",  # arity
        BAD_INT[env_id],
        r"\boxed{submit " + "9" * 5000 + "}",  # beyond Python's int-parsing limit
    ]
    check_malformed_actions(env_id, bad)


@pytest.mark.parametrize("env_id", IDS)
def test_wrong_final_answer_ends_episode(env_id: str) -> None:
    res = check_wrong_answer_ends_episode(env_id, WRONG_ANSWER[env_id])
    assert "Wrong" in res.observation or "Invalid" in res.observation


@pytest.mark.parametrize("policy", ["random", "constant", "first-oracle"])
@pytest.mark.parametrize("env_id", IDS)
def test_baseline_policies_fail_at_high_levels(env_id: str, policy: str) -> None:
    check_baseline_fails(env_id, policy)


@pytest.mark.parametrize("env_id", IDS)
def test_clone_and_state_branch_identically(env_id: str) -> None:
    check_clone_and_state_replay(env_id)


# ---------------------------------------------------------------- golden rules on hand-built instances
GRAPH = {0: {1: 4, 2: 1}, 1: {0: 4, 2: 2, 3: 1}, 2: {0: 1, 1: 2, 3: 7}, 3: {1: 1, 2: 7}}


def fixed_graph_env(budget: int) -> HiddenGraphShortestPath:
    env = HiddenGraphShortestPath(complexity=1)
    env.reset(seed=0)
    env.n, env.adj, env.source, env.target = 4, {k: dict(v) for k, v in GRAPH.items()}, 0, 3
    env.answer, env.revealed, env.queries_left = 4, set(), budget
    return env


def test_shortest_path_golden_dijkstra_order_and_budget() -> None:
    assert dijkstra(GRAPH, 0) == {0: 0, 1: 3, 2: 1, 3: 4}
    env = fixed_graph_env(budget=3)
    oracle = []
    while not env.done:
        oracle.append(env.solve())
        res = env.step(oracle[-1])
    assert oracle == [r"\boxed{neighbors 0}", r"\boxed{neighbors 2}", r"\boxed{neighbors 1}", r"\boxed{submit 4}"]
    assert res.info["success"] is True
    env = fixed_graph_env(budget=2)
    assert "1 (w=4), 2 (w=1)" in env.step(r"\boxed{neighbors 0}").observation
    assert "does not exist" in env.step(r"\boxed{neighbors 9}").observation  # refunded, not spent
    assert "[0 queries left]" in env.step(r"\boxed{neighbors 2}").observation
    out = env.step(r"\boxed{neighbors 1}").observation
    assert "budget exhausted" in out
    assert "w=" not in out
    assert env.step(r"\boxed{submit 5}").info["success"] is False


def fixed_peak_env() -> HiddenArrayPeak:
    env = HiddenArrayPeak(complexity=1)
    env.reset(seed=0)
    env.n, env.values, env.peak, env.known, env.seen, env.queries_left = 5, [1, 3, 7, 6, 2], 2, {}, {}, 3
    return env


def test_array_peak_golden_queries() -> None:
    env = fixed_peak_env()
    assert "a[1] = 3" in env.step(r"\boxed{get 1}").observation
    assert "a[2] > a[3]" in env.step(r"\boxed{compare 2 3}").observation
    assert "out of range" in env.step(r"\boxed{get 5}").observation
    assert env.queries_left == 1
    assert env.solve() == r"\boxed{compare 1 2}"  # knows a[2] > a[3], so the peak is in 0..2
    env.step(r"\boxed{get 2}")
    assert env.solve() == r"\boxed{submit 2}"  # a[1] < a[2] follows from the two gets
    assert "budget exhausted" in env.step(r"\boxed{get 0}").observation
    res = env.step(r"\boxed{submit 2}")
    assert res.info["success"] is True
    assert res.reward == 1.0


def test_peak_budget_is_logarithmic() -> None:
    env = HiddenArrayPeak(complexity=10)
    env.reset(seed=0)
    assert env.params["length"] == 4096
    assert env.queries_left == 12


PREREQS = {0: [], 1: [0], 2: [0], 3: [1, 2], 4: [], 5: [4]}


def fixed_schedule_env() -> TopologicalSchedule:
    env = TopologicalSchedule(complexity=1)
    env.reset(seed=0)
    env.n, env.prereqs, env.goal = 6, {k: list(v) for k, v in PREREQS.items()}, 3
    env.closure, env.inspected, env.queries_left = {0, 1, 2, 3}, set(), 4
    return env


def test_topological_schedule_golden_rules() -> None:
    env = fixed_schedule_env()
    assert topo_order({0, 1, 2, 3}, PREREQS) == [0, 1, 2, 3]
    assert env.check_schedule([0, 2, 1, 3]) is None
    assert "appears twice" in (env.check_schedule([0, 0, 1, 2, 3]) or "")
    assert "not needed" in (env.check_schedule([4, 0, 1, 2, 3]) or "")
    assert "before its prerequisite 0" in (env.check_schedule([1, 0, 2, 3]) or "")
    assert "missing, e.g. 2" in (env.check_schedule([0, 1]) or "")
    assert "requires: 1, 2" in env.step(r"\boxed{deps 3}").observation
    assert "no prerequisites" in env.step(r"\boxed{deps 0}").observation
    assert env.solve() == r"\boxed{deps 1}"
    res = env.step(r"\boxed{submit 0 1 3 2}")
    assert res.terminated
    assert res.info["success"] is False
    assert "comes before its prerequisite 2" in res.observation


def test_step_result_type_is_kept() -> None:
    env = gymverse.make(IDS[0])
    env.reset(seed=0)
    assert isinstance(env.step(env.solve()), StepResult)


INTERVALS = [(0, 4), (3, 5), (5, 9), (4, 6), (6, 7), (8, 10)]


def test_interval_scheduling_golden_rules() -> None:
    assert greedy_schedule(INTERVALS) == [0, 3, 4, 5]  # (0,4) (4,6) (6,7) (8,10): touching is not overlapping
    env = IntervalScheduling(complexity=1)
    env.reset(seed=0)
    env.intervals, env.optimum, env.answered, env.queries_left = list(INTERVALS), 4, {}, 6
    assert env.check([5, 4, 3, 0]) is None
    assert "overlaps" in (env.check([0, 1]) or "")
    assert "maximum is 4" in (env.check([1, 2]) or "")
    assert "repeats" in (env.check([0, 0]) or "")
    assert "does not exist" in (env.check([6]) or "")
    assert "interval 3 = [4, 6)" in env.step(r"\boxed{first_end 4}").observation
    assert "No interval starts at or after 9" in env.step(r"\boxed{first_end 9}").observation
    actions = []
    while not env.done:
        actions.append(env.solve())
        res = env.step(actions[-1])
    assert actions == [
        r"\boxed{first_end 0}",
        r"\boxed{first_end 6}",
        r"\boxed{first_end 7}",
        r"\boxed{first_end 10}",
        r"\boxed{submit 0 3 4 5}",
    ]  # first_end 4 was already answered, so the oracle reuses it
    assert res.info["success"] is True
