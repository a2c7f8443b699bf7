"""Built-in logic puzzles: oracle at every tested level, determinism, checks, format errors, weak policies fail."""

from __future__ import annotations

import gymverse
import numpy as np
import pytest
from gymverse import Env
from gymverse.envs._contract_testing import (
    MALFORMED_ACTIONS,
    check_format_errors,
    check_live_transcripts_repeat,
    check_oracle_solves,
    check_pickled_clone_and_rewind,
)
from gymverse.envs.logic.knights_knaves import _assignments, consistent, describe
from gymverse.envs.logic.latin_square import random_latin_square
from gymverse.envs.logic.nonogram import runs

LOGIC_IDS = ["logic:LatinSquare", "logic:GraphColoring", "logic:Nonogram", "logic:KnightsAndKnaves"]
SIZE_KEY = {
    "logic:LatinSquare": "size",
    "logic:GraphColoring": "nodes",
    "logic:Nonogram": "size",
    "logic:KnightsAndKnaves": "people",
}
#: Checking the board is always legal and never ends the episode.
CHECK = r"\boxed{check}"
BAD_ACTIONS = [
    *MALFORMED_ACTIONS,
    r"\boxed{place 1",
    r"\boxed{place 1 2}",
    r"\boxed{place a b c}",
    r"\boxed{row 99 1111}",
    r"\boxed{color 0 1}",
    r"\boxed{ask 0 1}",
    r"\boxed{submit K}",
]


@pytest.mark.parametrize("env_id", LOGIC_IDS)
@pytest.mark.parametrize("level", [1, 5, 10])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_oracle_succeeds(env_id: str, level: int, seed: int) -> None:
    env = gymverse.make(env_id, complexity=level)
    steps = check_oracle_solves(env, seed)
    assert len(steps) <= env.max_turns


@pytest.mark.parametrize("env_id", LOGIC_IDS)
def test_oracle_recovers_after_random_edits(env_id: str) -> None:
    env = gymverse.make(env_id, complexity=5, max_turns=200)
    env.reset(seed=4)
    for _ in range(8):
        a = env.sample_random_action()
        if "submit" not in a:
            env.step(a)
    res = None
    for _ in range(100):
        res = env.step(env.solve())
        if res.done:
            break
    assert res is not None
    assert res.info["success"] is True


@pytest.mark.parametrize("env_id", LOGIC_IDS)
@pytest.mark.parametrize("level", [1, 10])
def test_same_seed_same_transcript(env_id: str, level: int) -> None:
    check_live_transcripts_repeat(env_id, level, submit_as=CHECK)


@pytest.mark.parametrize("env_id", LOGIC_IDS)
def test_levels_change_instance_size(env_id: str) -> None:
    lo, hi = gymverse.make(env_id, complexity=1), gymverse.make(env_id, complexity=10)
    obs_lo, _ = lo.reset(seed=3)
    obs_hi, _ = hi.reset(seed=3)
    key = SIZE_KEY[env_id]
    assert hi.params[key] > lo.params[key]
    assert len(obs_hi) > len(obs_lo)
    assert isinstance(lo, Env)  # the spec is a classmethod of the env class
    spec = type(lo).complexity_spec()
    for name in spec.params:
        if name != "slack":
            vals = [spec.value(name, lvl) for lvl in range(1, 11)]
            assert vals == sorted(vals) or vals == sorted(vals, reverse=True), f"{name} is not monotone"


@pytest.mark.parametrize("env_id", LOGIC_IDS)
def test_malformed_actions_are_format_errors(env_id: str) -> None:
    env = gymverse.make(env_id, complexity=5, max_turns=100)
    env.reset(seed=0)
    check_format_errors(env, BAD_ACTIONS)


@pytest.mark.parametrize("env_id", LOGIC_IDS)
@pytest.mark.parametrize("level", [5, 10])
def test_random_and_constant_policies_fail(env_id: str, level: int) -> None:
    wins = {"random": 0, "oracle-first": 0, "check": 0}
    for seed in range(20):
        env = gymverse.make(env_id, complexity=level)
        env.reset(seed=seed)
        policies = {"random": None, "oracle-first": env.solve(), "check": CHECK}
        for name, const in policies.items():
            env.reset(seed=seed)
            res = None
            for _ in range(env.max_turns):
                res = env.step(const if const is not None else env.sample_random_action())
                if res.done:
                    break
            wins[name] += bool(res is not None and res.info.get("success"))
    assert all(w <= 1 for w in wins.values()), wins


@pytest.mark.parametrize("env_id", LOGIC_IDS)
def test_clone_mid_episode_branches_identically(env_id: str) -> None:
    env = gymverse.make(env_id, complexity=6)
    env.reset(seed=11)
    env.step(env.solve())
    check_pickled_clone_and_rewind(env, odd_action=CHECK)


# ------------------------------------------------------------------ golden rules


def test_latin_square_generator_and_checks() -> None:
    for n in (4, 7):
        sq = random_latin_square(n, np.random.default_rng(n))
        assert all(sorted(row) == list(range(1, n + 1)) for row in sq)
        assert all(sorted(col) == list(range(1, n + 1)) for col in zip(*sq))
    env = gymverse.make("logic:LatinSquare", complexity=1)
    env.reset(seed=0)
    given = sorted(env.given)  # type: ignore[attr-defined]
    r, c = given[0]
    res = env.step(rf"\boxed{{place {r + 1} {c + 1} 1}}")
    assert res.info["illegal"] is True
    assert "given" in res.observation
    free = next((i, j) for i in range(4) for j in range(4) if (i, j) not in env.given)  # type: ignore[attr-defined]
    dup = next(v for v in env.grid[free[0]] if v)  # type: ignore[attr-defined]
    env.step(rf"\boxed{{place {free[0] + 1} {free[1] + 1} {dup}}}")
    res = env.step(r"\boxed{check}")
    assert f"row {free[0] + 1} contains {dup} 2 times" in res.observation
    assert res.info["violations"] >= 1
    assert res.info["unfilled"] == env.unfilled()  # type: ignore[attr-defined]
    env.step(rf"\boxed{{clear {free[0] + 1} {free[1] + 1}}}")
    res = env.step(r"\boxed{submit}")
    assert res.terminated
    assert res.info["success"] is False
    assert "unfilled" in res.observation


def test_latin_square_accepts_any_valid_completion() -> None:
    env = gymverse.make("logic:LatinSquare", complexity=1, max_turns=100)
    env.reset(seed=0)
    env.given = set()  # type: ignore[attr-defined]
    for i in range(4):
        for j in range(4):
            # the cyclic square differs from the hidden one but is just as valid
            env.step(rf"\boxed{{place {i + 1} {j + 1} {(i + j) % 4 + 1}}}")
    assert env.step(r"\boxed{submit}").info["success"] is True


def test_graph_coloring_violations() -> None:
    env = gymverse.make("logic:GraphColoring", complexity=1, max_turns=50)
    env.reset(seed=0)
    env.edges = [(0, 1), (1, 2)]  # type: ignore[attr-defined]
    env.step(r"\boxed{color 1 2}")
    env.step(r"\boxed{color 2 2}")
    res = env.step(r"\boxed{check}")
    assert "edge 1-2: both vertices have color 2" in res.observation
    assert res.info["violations"] == 1
    assert res.info["unfilled"] == env.nodes - 2  # type: ignore[attr-defined]
    assert env.step(r"\boxed{color 1 9}").info["format_error"] is True
    for v in range(env.nodes):  # type: ignore[attr-defined]
        env.step(rf"\boxed{{color {v + 1} {1 + v % 2}}}")
    assert env.step(r"\boxed{submit}").info["success"] is True


def test_nonogram_runs_and_line_moves() -> None:
    assert runs([1, 1, 0, 1, 0]) == [2, 1]
    assert runs([0, 0, 0]) == [0]
    assert runs([1, 1, 1]) == [3]
    env = gymverse.make("logic:Nonogram", complexity=1, max_turns=50)
    env.reset(seed=0)
    env.picture = [[1, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]  # type: ignore[attr-defined]
    env.row_clues = [[2, 1], [0], [1], [4]]  # type: ignore[attr-defined]
    env.col_clues = [[1, 2], [1, 1], [1], [1, 1]]  # type: ignore[attr-defined]
    env.step(r"\boxed{col 1 1 0 1 1}")  # spaced cells are accepted too
    assert [row[0] for row in env.grid] == [1, 0, 1, 1]  # type: ignore[attr-defined]
    env.step(r"\boxed{row 1 1.##}")
    res = env.step(r"\boxed{check}")
    assert "row 1 has blocks 1 2 but the clue is 2 1" in res.observation
    assert res.info["unfilled"] == 16 - 4 - 4 + 1
    for r, line in enumerate(["1101", "0000", "1000", "####"]):
        env.step(rf"\boxed{{row {r + 1} {line}}}")
    assert env.step(r"\boxed{submit}").info["success"] is True


def test_knights_and_knaves_semantics() -> None:
    table = _assignments(2)  # rows: (K?, K?) for persons 1, 2
    # "Person 1 says: 2 is a knave": exactly the worlds where 1 and 2 differ
    says = (0, "is", (1, 0))
    assert describe(says, 2) == 'Person 1 says: "2 is a knave."'
    assert [tuple(map(bool, row)) for row in table[consistent(says, table)]] == [(True, False), (False, True)]
    # a knave can never claim "at least one of us (1 and 2) is a knave" -> speaker 1 is a knight, 2 a knave
    liar = (0, "some_knave", (0, 1))
    assert [tuple(map(bool, row)) for row in table[consistent(liar, table)]] == [(True, False)]
    env = gymverse.make("logic:KnightsAndKnaves", complexity=1, max_turns=20)
    env.reset(seed=0)
    env.truth = [True, False, False]  # type: ignore[attr-defined]
    assert "Yes" in env.step(r"\boxed{ask 2 3}").observation  # knave about knave: lies "yes"
    assert "No" in env.step(r"\boxed{ask 2 1}").observation  # knave about knight: lies "no"
    assert "No" in env.step(r"\boxed{ask 1 3}").observation  # knight about knave: truthful "no"
    res = env.step(r"\boxed{submit K K N}")
    assert res.terminated
    assert res.info["wrong"] == 1
    assert "The answer was K N N" in res.observation
