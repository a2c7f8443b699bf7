r"""reasoning-gym tasks as one-turn GymVerse envs: ``rg:<task>`` (``pip install 'gymverse-suites[rg]'``).

Each task is reasoning-gym's own generator and scorer; nothing is re-implemented here.

* **Complexity.** reasoning-gym defines a curriculum per task: attributes with a list of levels each
  (``BaseCurriculum``). Complexity 1..10 maps linearly (`gymverse.complexity.interpolate`) onto the task's usable
  global curriculum levels ``0..n-1`` and the config is the curriculum's own ``generate_configuration`` at that
  level, in the library's default (inclusive) range mode. A level is usable when the config it generates passes
  the config's own ``validate()``; some curricula's top levels do not (e.g. ``caesar_cipher``'s last rotation
  level) and are cut off.
* **Instances.** The episode seed is the dataset's ``seed`` (``size=1``, item 0): same seed, same question.
* **Scoring.** The answer is the last ``\boxed{...}`` of the reply; reward is the task's ``score_answer`` (0..1),
  success is a score of 1. No box: the format penalty, and the one turn ends truncated.
* **Oracle.** ``\boxed{<the dataset's answer>}``. Tasks graded by a verifier with no reference answer
  (`NO_REFERENCE_ANSWER`) have no oracle.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, ClassVar

from gymverse.actions import parse_boxed
from gymverse.complexity import LEVELS, interpolate
from gymverse.core import FORMAT_PENALTY, SUCCESS_REWARD, Env, EnvMetadata, StepResult
from gymverse.registry import register

from gymverse_suites._common import SEED_SPACE, GlobalRng, import_suite

FAMILY = "rg"

#: Tasks of reasoning-gym 0.1.25 with a curriculum (the complexity knob), in its own order.
TASKS: tuple[str, ...] = (
    "ab", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion", "basic_arithmetic", "bf",
    "binary_alternation", "binary_matrix", "bitwise_arithmetic", "boxnet", "caesar_cipher", "calendar_arithmetic",
    "chain_sum", "circuit_logic", "codeio", "coin_flip", "color_cube_rotation", "complex_arithmetic", "count_bits",
    "count_primes", "countdown", "course_schedule", "cryptarithm", "decimal_arithmetic", "decimal_chain_sum", "dice",
    "emoji_mystery", "family_relationships", "figlet_font", "fraction_simplification", "futoshiki", "game_of_life",
    "game_of_life_halting", "gcd", "graph_color", "group_anagrams", "intermediate_integration", "isomorphic_strings",
    "jugs", "kakurasu", "knights_knaves", "largest_island", "lcm", "leg_counting", "letter_counting",
    "letter_jumble", "mahjong_puzzle", "manipulate_matrix", "maze", "mini_sudoku", "n_queens",
    "needle_haystack", "number_filtering", "number_format", "number_sequence", "number_sorting",
    "palindrome_generation", "palindrome_partitioning", "path_star", "polynomial_equations",
    "polynomial_multiplication", "pool_matrix", "power_function", "prime_factorization", "products",
    "propositional_logic", "puzzle24", "quantum_lock", "ransom_note", "rearc", "rectangle_count", "rotate_matrix",
    "rotten_oranges", "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering", "shortest_path",
    "simple_equations", "simple_geometry", "simple_integration", "sokoban", "spell_backward", "spiral_matrix",
    "string_insertion", "string_manipulation", "string_splitting", "string_synthesis", "sudoku", "survo",
    "syllogism", "time_intervals", "tower_of_hanoi", "tsumego", "word_ladder", "word_sequence_reversal",
    "word_sorting", "zebra_puzzles",
)  # fmt: skip

#: reasoning-gym tasks that are not registered, and why (checked against the installed package by the tests).
LEFT_OUT: dict[str, str] = {
    "acre": "no curriculum: the task has no difficulty parameters to map onto complexity",
    "composite": "no curriculum: it mixes other tasks (register those instead)",
    "gsm_symbolic": "no curriculum: the task has no difficulty parameters to map onto complexity",
    "list_functions": "no curriculum: the task has no difficulty parameters to map onto complexity",
    "knight_swap": "its curriculum generates min_nodes < 6 at every level, which its own config rejects",
    "modulo_grid": "only its first curriculum level passes its own config validation (max_target must be > 0)",
}

#: Tasks whose answer is checked by a verifier and whose dataset entry carries no reference answer: no oracle.
NO_REFERENCE_ANSWER = frozenset({"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"})

_PROMPT_TAIL = "\n\nGive your final answer inside \\boxed{...}."
_DATASET_CACHE_SIZE = 32


class ReasoningGymTask(Env):
    """One reasoning-gym task; subclassed per task by `task_class` (the class carries the task's level table)."""

    task: ClassVar[str]

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        self._global_rng = GlobalRng(int(self.rng.integers(0, SEED_SPACE)))
        self.rg_seed = 0
        self.question = ""
        self.answer: str | None = None
        self._entry: dict[str, Any] = {}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.rg_seed = int(self.rng.integers(0, SEED_SPACE))
        with self._global_rng.active(self.rg_seed):
            entry = _dataset(self.task, int(self.params["curriculum_level"]), self.rg_seed)[0]
        self._entry = entry
        self.question = str(entry["question"])
        self.answer = None if entry.get("answer") is None else str(entry["answer"])
        info = {"rg_task": self.task, "rg_seed": self.rg_seed, "curriculum_level": self.params["curriculum_level"]}
        return self.question + _PROMPT_TAIL, info

    def _step(self, action: str) -> StepResult:
        answer = parse_boxed(action, what="your final answer")
        dataset = _dataset(self.task, int(self.params["curriculum_level"]), self.rg_seed)
        with self._global_rng.active():
            score = float(dataset.score_answer(answer=answer, entry=self._entry))
        success = score >= SUCCESS_REWARD
        verdict = "Correct." if success else f"Not correct (score {score:.2f})."
        return StepResult(verdict, score, True, False, {"success": success, "score": score})

    def solve(self) -> str:
        """The dataset's reference answer in a box."""
        if self.answer is None:
            raise NotImplementedError(f"rg:{self.task} has no reference answer (a verifier scores it): no oracle")
        return "\\boxed{" + self.answer + "}"

    def sample_random_action(self) -> str:
        """A boxed random number (a wrong answer for almost every task, but well-formed)."""
        return "\\boxed{" + str(int(self.rng.integers(0, 100))) + "}"


def _rg() -> Any:
    import_suite("reasoning_gym", "rg")
    from reasoning_gym import factory

    return factory


def _config(task: str, level: int, seed: int) -> Any:
    curriculum = _rg().create_curriculum(task)
    curriculum.set_global_level(level)
    config = curriculum.generate_configuration({"seed": seed, "size": 1})
    validate = getattr(config, "validate", None)
    if callable(validate):
        validate()
    return config


_DATASETS: OrderedDict[tuple[str, int, int], Any] = OrderedDict()


def _dataset(task: str, level: int, seed: int) -> Any:
    """The task's dataset at curriculum `level` and `seed` (a few kept: scoring reuses the one that generated)."""
    key = (task, level, seed)
    if key in _DATASETS:
        _DATASETS.move_to_end(key)
        return _DATASETS[key]
    dataset_cls, _ = _rg().DATASETS[task]
    dataset = dataset_cls(config=_config(task, level, seed))
    _DATASETS[key] = dataset
    while len(_DATASETS) > _DATASET_CACHE_SIZE:
        _DATASETS.popitem(last=False)
    return dataset


def usable_levels(task: str) -> int:
    """How many of the task's curriculum levels, from the lowest, give a config its own validation accepts."""
    curriculum = _rg().create_curriculum(task)
    n = max(len(attr.levels) for attr in curriculum.attributes.values())
    usable = 0
    for level in range(n):
        try:
            _config(task, level, 0)
        except (AssertionError, ValueError):
            break
        usable = level + 1
    return usable


@functools.cache
def task_class(task: str) -> type[ReasoningGymTask]:
    """The env class of reasoning-gym task `task`, with its complexity -> curriculum-level table."""
    if task not in TASKS:
        raise ValueError(f"unknown reasoning-gym task {task!r}; known: {', '.join(TASKS)}")
    n = usable_levels(task)
    if n < 2:
        raise ValueError(f"rg:{task}: only {n} curriculum level(s) give a valid config; no complexity range")
    table = [int(interpolate(0, n - 1, level)) for level in LEVELS]
    dataset_cls, _ = _rg().DATASETS[task]
    category = dataset_cls.__module__.split(".")[1] if dataset_cls.__module__.count(".") else "other"
    doc = (dataset_cls.__doc__ or "").strip().splitlines()
    metadata = EnvMetadata(
        name=task,
        family=FAMILY,
        domain="other",  # GymVerse's domains name its own families (synth seeds from them); the category is in extra
        description=doc[0] if doc else f"reasoning-gym task {task}",
        action_format=r"\boxed{<answer>}",
        max_turns=1,
        reward_range=(FORMAT_PENALTY, SUCCESS_REWARD),
        extra={"source": "reasoning-gym", "category": category, "curriculum_levels": n},
    )
    attrs = {"task": task, "metadata": metadata, "complexity_params": {"curriculum_level": table}}
    return type(f"RG_{task}", (ReasoningGymTask,), attrs)


def __getattr__(name: str) -> Any:
    # ``gymverse_suites.rg:RG_<task>`` entry points: the class is made on first use, so listing envs builds none
    if name.startswith("RG_") and name[3:] in TASKS:
        return task_class(name[3:])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_envs() -> None:
    """Register ``rg:<task>`` for every task in `TASKS` (nothing is imported until one is used)."""
    for task in TASKS:
        register(f"{FAMILY}:{task}", f"{__name__}:RG_{task}")
