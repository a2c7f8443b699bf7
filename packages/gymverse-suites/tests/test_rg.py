"""reasoning-gym tasks built from the real package at levels 1 and 10, scored by the task's own scorer."""

from __future__ import annotations

import random
from typing import Any

import gymverse
import numpy as np
import pytest
from gymverse_suites import rg

pytest.importorskip("reasoning_gym")
FAST = ["basic_arithmetic", "word_sorting", "maze", "mini_sudoku", "family_relationships"]


def test_task_lists_match_the_installed_package() -> None:
    factory = rg._rg()
    assert set(rg.TASKS) | set(rg.LEFT_OUT) == set(factory.DATASETS)  # every task is registered or explained
    assert set(rg.TASKS) == set(factory.CURRICULA) - {"knight_swap", "modulo_grid"}
    # the reasons LEFT_OUT gives still hold, and every registered task has a complexity range
    assert rg.usable_levels("knight_swap") == 0 and rg.usable_levels("modulo_grid") == 1
    assert all(rg.usable_levels(t) >= 2 for t in rg.TASKS)
    assert set(gymverse.list_envs("rg")) == {f"rg:{t}" for t in rg.TASKS}


@pytest.mark.parametrize("task", FAST)
def test_levels_1_and_10_oracle_scores_one_and_replays(task: str, play: Any) -> None:
    firsts = []
    for level in (1, 10):
        env = gymverse.make(f"rg:{task}", complexity=level)
        transcript = play(env, 11)
        assert transcript[-1][2] is True and transcript[-1][1][1] == 1.0  # the task's scorer gave full marks
        assert play(gymverse.make(f"rg:{task}", complexity=level), 11) == transcript  # same seed, same run
        firsts.append(transcript[0])
    assert firsts[0] != firsts[1]  # the curriculum level changes the instance


def test_complexity_follows_the_curriculum_and_cuts_invalid_top_levels(play: Any) -> None:
    table = rg.task_class("basic_arithmetic").complexity_params["curriculum_level"]
    assert table[0] == 0 and table == sorted(table) and table[-1] == rg.usable_levels("basic_arithmetic") - 1
    curriculum = rg._rg().create_curriculum("caesar_cipher")
    defined = max(len(a.levels) for a in curriculum.attributes.values())
    assert 2 <= rg.usable_levels("caesar_cipher") < defined  # its top rotation levels fail its own validate()
    env = gymverse.make("rg:caesar_cipher", complexity=10)
    assert play(env, 3)[-1][2] is True


def test_wrong_and_malformed_answers() -> None:
    env = gymverse.make("rg:basic_arithmetic", complexity=5)
    env.reset(seed=2)
    wrong = env.step("\\boxed{not a number}")
    assert wrong.terminated and wrong.reward == 0.0 and wrong.info["success"] is False
    env.reset(seed=2)
    bad = env.step("the answer is 12")
    assert bad.truncated and bad.info["format_error"] and bad.reward == env.format_penalty
    assert bad.info["success"] is False


def test_verifier_only_tasks_score_without_an_oracle() -> None:
    env = gymverse.make("rg:propositional_logic", complexity=1)
    env.reset(seed=0)
    with pytest.raises(NotImplementedError, match="no reference answer"):
        env.solve()
    assert env.step("\\boxed{P}").info["success"] is False


def test_global_generators_untouched(play: Any) -> None:
    py, npy = random.getstate(), np.random.get_state(legacy=False)  # noqa: NPY002
    env = gymverse.make("rg:word_sorting", complexity=4)
    play(env, 5)
    assert random.getstate() == py
    assert str(np.random.get_state(legacy=False)) == str(npy)  # noqa: NPY002
