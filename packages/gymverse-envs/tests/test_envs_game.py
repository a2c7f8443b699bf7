"""Built-in game envs: oracle at every tested level, determinism, format errors, weak policies fail, golden rules."""

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
from gymverse.envs.game.hanoi import next_move, optimal_moves
from gymverse.envs.game.lights_out import min_presses, press_mask
from gymverse.envs.game.mastermind import score
from gymverse.envs.game.minesweeper import flood_reveal, logic_plan

GAME_IDS = ["game:GuessTheNumber", "game:Mastermind", "game:LightsOut", "game:TowerOfHanoi", "game:Minesweeper"]
SIZE_KEY = {
    "game:GuessTheNumber": "upper",
    "game:Mastermind": "pegs",
    "game:LightsOut": "size",
    "game:TowerOfHanoi": "disks",
    "game:Minesweeper": "size",
}
BAD_ACTIONS = [*MALFORMED_ACTIONS, r"\boxed{press 1", "}}}{{{"]


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("level", [1, 5, 10])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_oracle_succeeds(env_id: str, level: int, seed: int) -> None:
    env = gymverse.make(env_id, complexity=level)
    steps = check_oracle_solves(env, seed)
    assert len(steps) <= env.max_turns


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("level", [1, 10])
def test_same_seed_same_transcript(env_id: str, level: int) -> None:
    check_live_transcripts_repeat(env_id, level)


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_levels_change_instance_size(env_id: str) -> None:
    lo, hi = gymverse.make(env_id, complexity=1), gymverse.make(env_id, complexity=10)
    lo.reset(seed=3)
    hi.reset(seed=3)
    key = SIZE_KEY[env_id]
    assert hi.params[key] > lo.params[key]
    assert isinstance(lo, Env)  # the spec is a classmethod of the env class
    spec = type(lo).complexity_spec()
    for name in spec.params:
        # budgets ("slack", "max_turns") are relative to the instance size, so only size params must be monotone
        if isinstance(spec.value(name, 1), int | float) and name not in ("slack", "max_turns"):
            vals = [spec.value(name, lvl) for lvl in range(1, 11)]
            assert vals == sorted(vals) or vals == sorted(vals, reverse=True), f"{name} is not monotone"


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_malformed_actions_are_format_errors(env_id: str) -> None:
    env = gymverse.make(env_id, complexity=5)
    env.reset(seed=0)
    check_format_errors(env, BAD_ACTIONS, reset_seed=0)


@pytest.mark.parametrize("env_id", GAME_IDS)
@pytest.mark.parametrize("level", [5, 10])
def test_random_and_constant_policies_fail(env_id: str, level: int) -> None:
    wins_random = wins_constant = 0
    for seed in range(20):
        env = gymverse.make(env_id, complexity=level)
        env.reset(seed=seed)
        res = None
        for _ in range(env.max_turns):
            res = env.step(env.sample_random_action())
            if res.done:
                break
        wins_random += bool(res is not None and res.info.get("success"))
        env.reset(seed=seed)
        const = env.solve()  # a sensible first move, repeated forever
        for _ in range(env.max_turns):
            res = env.step(const)
            if res.done:
                break
        wins_constant += bool(res is not None and res.info.get("success"))
    assert wins_random <= 1
    assert wins_constant <= 1


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_clone_mid_episode_branches_identically(env_id: str) -> None:
    env = gymverse.make(env_id, complexity=6)
    env.reset(seed=11)
    for _ in range(2):
        env.step(env.sample_random_action())
    check_pickled_clone_and_rewind(env)


# ------------------------------------------------------------------ golden rules


def test_mastermind_peg_scoring() -> None:
    assert score((0, 1, 2, 3), (0, 1, 2, 3)) == (4, 0)
    assert score((0, 1, 2, 3), (3, 2, 1, 0)) == (0, 4)
    assert score((0, 0, 1, 1), (0, 1, 0, 2)) == (1, 2)
    assert score((0, 0, 0, 1), (1, 1, 1, 0)) == (0, 2)
    assert score((2, 2, 2, 2), (0, 1, 3, 4)) == (0, 0)
    env = gymverse.make("game:Mastermind", complexity=3)
    env.reset(seed=0)
    env.secret = (0, 0, 1, 1)  # type: ignore[attr-defined]
    res = env.step(r"I think \boxed{1 2 1 3}")
    assert (res.info["black"], res.info["white"]) == (1, 2)
    assert "1 black, 2 white" in res.observation
    assert env.step(r"\boxed{1122}").info["success"] is True


@pytest.mark.parametrize(
    "guess", [r"\boxed{² 1 1 1}", r"\boxed{①②③④}", r"\boxed{١ ١ ١ ١}", r"\boxed{1 1 1 " + "1" * 5000 + "}"]
)
def test_mastermind_rejects_unicode_digits_and_huge_numbers(guess: str) -> None:
    # str.isdigit accepts these, int() then raised ValueError out of step (issue 19)
    env = gymverse.make("game:Mastermind", complexity=3)
    env.reset(seed=0)
    res = env.step(guess)
    assert res.info["format_error"] is True
    assert "digits" in res.observation
    assert not res.terminated


def test_lights_out_toggle_pattern_and_gf2_solver() -> None:
    corner, centre = press_mask(3, 0, 0), press_mask(3, 1, 1)
    assert [i for i in range(9) if corner >> i & 1] == [0, 1, 3]
    assert [i for i in range(9) if centre >> i & 1] == [1, 3, 4, 5, 7]
    assert min_presses(3, corner ^ centre) == [0, 4]
    # 4x4: the press matrix is singular (nullity 4), so the solver must search the null space for the lightest
    # solution; compare with brute force over all 2**16 press sets
    lightest: dict[int, int] = {}
    masks = [press_mask(4, i // 4, i % 4) for i in range(16)]
    for subset in range(1 << 16):
        state = 0
        for i in range(16):
            if subset >> i & 1:
                state ^= masks[i]
        lightest[state] = min(lightest.get(state, 99), subset.bit_count())
    rng = np.random.default_rng(0)
    for state in rng.choice(sorted(lightest), size=40, replace=False):
        presses = min_presses(4, int(state))
        assert len(presses) == lightest[int(state)]
        result = 0
        for i in presses:
            result ^= masks[i]
        assert result == int(state)
    env = gymverse.make("game:LightsOut", complexity=1)
    env.reset(seed=0)
    env.state = 0  # type: ignore[attr-defined]
    res = env.step(r"\boxed{press 2 2}")
    assert res.info["lit"] == 5
    assert "0 1 0\n 2  1 1 1\n 3  0 1 0" in res.observation
    assert env.step(r"\boxed{press 2 2}").info["success"] is True


def test_hanoi_optimal_moves_and_illegal_moves() -> None:
    for n in range(1, 9):
        assert optimal_moves([0] * n, 2) == 2**n - 1
    assert next_move([0, 0, 0], 2) == (0, 2)
    assert next_move([0, 0], 2) == (0, 1)
    # largest disk already home; disk 1 goes A->C after disk 0 steps aside C->B and back
    assert optimal_moves([2, 0, 2], 2) == 3
    assert next_move([2, 0, 2], 2) == (2, 1)
    env = gymverse.make("game:TowerOfHanoi", complexity=1)
    env.reset(seed=0)
    env.where, env.target = [0, 0, 0], 2  # type: ignore[attr-defined]
    assert env.step(r"\boxed{move B C}").info["illegal"] is True
    assert "empty" in env.step(r"\boxed{move B C}").observation
    env.step(r"\boxed{move A B}")
    res = env.step(r"\boxed{move A B}")
    assert "cannot go on smaller disk 1" in res.observation
    assert env.where == [1, 0, 0]  # type: ignore[attr-defined]
    assert env.step(r"\boxed{move A D}").info["format_error"] is True


def test_minesweeper_flood_logic_and_mine() -> None:
    mines = frozenset({(0, 3)})
    revealed: set[tuple[int, int]] = set()
    flood_reveal(4, mines, revealed, (3, 0))
    assert (0, 3) not in revealed
    assert len(revealed) == 15
    assert logic_plan(4, mines, revealed) == ([], True)
    # a partial view of the bottom-left corner; the solver must chain deductions (incl. the mine count) to finish
    mines2 = frozenset({(0, 1), (3, 3)})
    view = {(2, 0), (3, 0), (1, 0), (1, 1)}
    plan, ok = logic_plan(4, mines2, view)
    assert ok
    assert plan
    assert not set(plan) & mines2
    known = set(view)
    for cell in plan:
        flood_reveal(4, mines2, known, cell)
    assert known == {(r, c) for r in range(4) for c in range(4)} - mines2
    # a true 50/50 (two mine layouts fit every number; brute-force checked) must be rejected, never guessed
    sym = frozenset({(0, 0), (0, 2), (0, 3)})
    opened: set[tuple[int, int]] = set()
    flood_reveal(5, sym, opened, (4, 4))
    _, solvable = logic_plan(5, sym, opened)
    assert solvable is False
    env = gymverse.make("game:Minesweeper", complexity=1)
    env.reset(seed=0)
    r, c = sorted(env.mines)[0]  # type: ignore[attr-defined]
    res = env.step(rf"\boxed{{reveal {r + 1} {c + 1}}}")
    assert res.terminated
    assert res.info["success"] is False
    assert "BOOM" in res.observation
