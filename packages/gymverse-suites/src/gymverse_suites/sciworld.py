r"""ScienceWorld tasks as ``sciworld:<task id>`` envs, ``sciworld:1-1`` (boil) .. ``sciworld:10-2``.

Install: ``pip install 'gymverse-suites[sciworld]'`` and a Java runtime (Debian: default-jre-headless).

The ``scienceworld`` package runs its simulator (a JVM it starts through py4j); this module picks the task
variation, the simplifications and the oracle, and keeps transcripts replayable.

* **Complexity.** ScienceWorld's own difficulty knob is its list of simplifications (containers and doors open,
  self-watering pots, no electrical actions, teleporting). Level 1 plays with all of them, each level up removes
  more (`SIMPLIFICATIONS`, table in ``complexity_params``), level 10 with none: the full task.
* **Instances.** The seed picks one of the task's *train* variations.
* **Actions** are ScienceWorld's text commands inside ``\boxed{...}`` (``\boxed{open door to kitchen}``).
* **Reward and success.** ScienceWorld's score (0..100) as reward deltas / 100, so an episode's return is its
  final score / 100; success is a completed task at score 100. ScienceWorld ends failed tasks at a negative score.
* **Oracle.** ScienceWorld's gold action sequence for the loaded variation and simplifications.
* **State.** The simulator lives in the JVM: `get_state`/`clone` keep the episode's seed, level and actions and
  restore by replaying them into a fresh simulator.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any, ClassVar

from gymverse.actions import parse_boxed
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import register

from gymverse_suites._common import import_suite

FAMILY = "sciworld"
#: ScienceWorld 1.2.3's tasks by its own task ids (``sciworld:1-1`` is ``boil``; full names make ids too long).
TASKS: dict[str, str] = {
    "1-1": "boil", "1-2": "melt", "1-3": "freeze", "1-4": "change-the-state-of-matter-of", "2-1": "use-thermometer",
    "2-2": "measure-melting-point-known-substance", "2-3": "measure-melting-point-unknown-substance",
    "3-1": "power-component", "3-2": "power-component-renewable-vs-nonrenewable-energy", "3-3": "test-conductivity",
    "3-4": "test-conductivity-of-unknown-substances", "4-1": "find-living-thing", "4-2": "find-non-living-thing",
    "4-3": "find-plant", "4-4": "find-animal", "5-1": "grow-plant", "5-2": "grow-fruit", "6-1": "chemistry-mix",
    "6-2": "chemistry-mix-paint-secondary-color", "6-3": "chemistry-mix-paint-tertiary-color",
    "7-1": "lifespan-longest-lived", "7-2": "lifespan-shortest-lived",
    "7-3": "lifespan-longest-lived-then-shortest-lived",
    "8-1": "identify-life-stages-1", "8-2": "identify-life-stages-2", "9-1": "inclined-plane-determine-angle",
    "9-2": "inclined-plane-friction-named-surfaces", "9-3": "inclined-plane-friction-unnamed-surfaces",
    "10-1": "mendelian-genetics-known-plant", "10-2": "mendelian-genetics-unknown-plant",
}  # fmt: skip
#: Simplifications in the order levels remove them (a prefix of this list is kept); electrical tasks never get
#: ``noElectricalAction`` (ScienceWorld rejects it for them).
SIMPLIFICATIONS = ("openContainers", "selfWateringFlowerPots", "noElectricalAction", "openDoors", "teleportAction")
_KEPT = [5, 5, 4, 4, 3, 3, 2, 2, 1, 0]  # simplifications kept at levels 1..10
_STEP_LIMIT = 100
_RANDOM_COMMANDS = (
    "look around", "inventory", "wait1", "task", "go to hallway", "go to kitchen", "go to outside",
    "open door to hallway", "open door to kitchen", "pick up thermometer",
)  # fmt: skip


class ScienceWorldTask(Env):
    """One ScienceWorld task; subclassed per task by `task_class`."""

    task: ClassVar[str]
    complexity_params = {"simplifications_kept": _KEPT}

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        self._sw: Any = None
        self.variation = 0
        self.simplifications = ""
        self.actions: list[str] = []
        self.score = 0
        self._gold: list[str] = []

    def _simulator(self) -> Any:
        if self._sw is None:
            self._sw = import_suite("scienceworld", "sciworld").ScienceWorldEnv("", envStepLimit=_STEP_LIMIT)
        return self._sw

    def _load(self) -> str:
        sw = self._simulator()
        sw.load(self.task, self.variation, self.simplifications, generateGoldPath=True)
        obs, _ = sw.reset()
        self._gold = list(sw.get_gold_action_sequence())
        return f"{sw.get_task_description()}\n{obs}"

    def _reset(self) -> tuple[str, dict[str, Any]]:
        sw = self._simulator()
        sw.load(self.task, 0, "", generateGoldPath=False)
        variations = list(sw.get_variations_train())
        self.variation = int(variations[int(self.rng.integers(0, len(variations)))])
        kept = SIMPLIFICATIONS[: int(self.params["simplifications_kept"])]
        if self.task.startswith(("power-component", "test-conductivity")):
            kept = tuple(s for s in kept if s != "noElectricalAction")
        self.simplifications = ",".join(kept)
        self.actions, self.score = [], 0
        obs = self._load()
        return obs, {"variation": self.variation, "simplifications": self.simplifications}

    def _step(self, action: str) -> StepResult:
        command = " ".join(parse_boxed(action, what="one ScienceWorld command").split())
        self.actions.append(command)
        obs, delta, completed, sw_info = self._sw.step(command)
        self.score = int(sw_info["score"])
        success = bool(completed and self.score >= 100)
        return StepResult(
            str(obs), float(delta) / 100, bool(completed), False, {"success": success, "score": self.score}
        )

    def solve(self) -> str:
        """The next action of ScienceWorld's gold path (valid when every earlier action followed it)."""
        if self.turn >= len(self._gold):
            raise NotImplementedError(f"sciworld:{self.task}: the gold path has no action for turn {self.turn + 1}")
        return "\\boxed{" + self._gold[self.turn] + "}"

    def sample_random_action(self) -> str:
        """One of ScienceWorld's state-free commands (look, inventory, wait, moving between rooms), boxed.

        Not drawn from the simulator's valid-action list: that list differs between a simulator and one replayed
        to the same state (measured: the checker's clone check diverged), and a draw must replay exactly.
        """
        return "\\boxed{" + _RANDOM_COMMANDS[int(self.rng.integers(0, len(_RANDOM_COMMANDS)))] + "}"

    def close(self) -> None:
        """Stop the simulator's JVM."""
        if self._sw is not None:
            proc = getattr(getattr(self._sw, "_gateway", None), "java_process", None)
            tempdir = getattr(self._sw, "_obj_tree_tempdir", None)
            self._sw.close()
            self._sw = None
            if tempdir is not None:  # ScienceWorld never cleans its object-tree folder up itself
                tempdir.cleanup()
            if proc is not None:  # ScienceWorld leaves the JVM's pipes open (ResourceWarnings at exit)
                for pipe in (proc.stdin, proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                proc.wait(timeout=30)

    # ----------------------------------------------------------------- state: replayed into a fresh simulator
    def get_state(self) -> dict[str, Any]:
        """Everything but the simulator; `set_state` replays the episode's actions to rebuild it."""
        return copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "_sw"})

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state` snapshot by replaying its actions into this env's simulator."""
        self.__dict__.update(copy.deepcopy(dict(state)))
        if self._needs_reset:
            return
        self._load()
        for command in self.actions:
            self._sw.step(command)

    def clone(self) -> Env:
        """An independent copy (its own simulator) in the same state."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update({"_sw": None})
        twin.set_state(self.get_state())
        return twin


@functools.cache
def task_class(task_id: str) -> type[ScienceWorldTask]:
    """The env class of ScienceWorld task `task_id` (``1-1`` .. ``10-2``)."""
    if task_id not in TASKS:
        raise ValueError(f"unknown ScienceWorld task id {task_id!r}; known: {', '.join(TASKS)}")
    task = TASKS[task_id]
    metadata = EnvMetadata(
        name=task_id,
        family=FAMILY,
        domain="other",
        description=f"ScienceWorld task {task_id} ({task}): an elementary-science experiment in a text world",
        action_format="\\boxed{<a ScienceWorld command>}, e.g. \\boxed{open door to kitchen}",
        max_turns=_STEP_LIMIT,
        reward_range=(-1.0, 1.0),
        extra={"source": "scienceworld", "task_name": task},
    )
    return type(_class_name(task_id), (ScienceWorldTask,), {"task": task, "metadata": metadata})


def _class_name(task_id: str) -> str:
    return "SW_" + task_id.replace("-", "_")


def __getattr__(name: str) -> Any:
    # ``gymverse_suites.sciworld:SW_<id>`` entry points: the class is made on first use
    by_name = {_class_name(t): t for t in TASKS}
    if name in by_name:
        return task_class(by_name[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_envs() -> None:
    """Register ``sciworld:<task_id>`` for every task."""
    for task_id in TASKS:
        register(f"{FAMILY}:{task_id}", f"{__name__}:{_class_name(task_id)}")
