r"""TextWorld games made by TextWorld's own generator, as ``textworld:TextWorld``.

Install: ``pip install 'gymverse-suites[textworld]'`` (spaCy and ``jericho``, which builds from source).

``textworld.make`` generates and compiles each game (Inform 7 -> a Z-machine file) and ``textworld.start`` plays it;
this module picks the generator's options by complexity, keeps the game files in a private temporary folder
(removed at `close`, or when the env is collected) and maps text commands and scores.

* **Complexity** maps onto ``textworld.GameOptions`` (what ``tw-make custom`` takes): world size ``nb_rooms``
  1 -> 12, ``nb_objects`` 2 -> 30 and ``quest_length`` 1 -> 10 (`ROOMS`, `OBJECTS`, `QUEST_LENGTH`).
* **Instances.** The seed draws the generator's seed (``GameOptions.seeds``): the same seed makes the same game
  file, byte for byte, and the same transcript.
* **Actions** are TextWorld commands inside ``\boxed{...}`` (``\boxed{open wooden door}``).
* **Reward and success.** TextWorld's score, as deltas divided by the game's ``max_score`` (a return is the final
  score / max score); success is TextWorld's ``won``; a lost game ends the episode unsuccessfully.
* **Oracle.** TextWorld's ``policy_commands``: its own plan from the current state to the win. Random play draws
  from TextWorld's ``admissible_commands`` (sorted).
* **State.** The interpreter is native (jericho): `get_state`/`clone` keep the commands and replay them into a
  fresh interpreter on a copy of the game files.
"""

from __future__ import annotations

import copy
import functools
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gymverse.actions import parse_boxed
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import register

from gymverse_suites._common import SEED_SPACE, import_suite

FAMILY = "textworld"
ROOMS = [1, 2, 2, 3, 4, 5, 6, 8, 10, 12]
OBJECTS = [2, 4, 6, 8, 10, 14, 18, 22, 26, 30]
QUEST_LENGTH = [1, 2, 2, 3, 4, 5, 6, 7, 8, 10]
_INFOS = ("policy_commands", "admissible_commands", "score", "max_score", "won", "lost", "objective", "description")


@functools.lru_cache(maxsize=16)
def generate(seed: int, nb_rooms: int, nb_objects: int, quest_length: int) -> dict[str, bytes]:
    """TextWorld's generator and compiler in a scratch folder: the game's files by name (game.z8, game.json).

    Kept for the last 16 games: a group of episodes on one seed (GRPO) and the checker's repeated resets compile a
    game once (0.6-7 s measured) instead of once per reset.
    """
    tw = import_suite("textworld", FAMILY)
    options = tw.GameOptions()
    options.seeds = seed
    options.nb_rooms, options.nb_objects, options.quest_length = nb_rooms, nb_objects, quest_length
    with tempfile.TemporaryDirectory(prefix="gymverse-textworld-make-") as scratch, warnings.catch_warnings():
        # the generator's notes on its own text grammar ("Not enough variation for ...") are not the caller's
        warnings.simplefilter("ignore", tw.generator.GenerationWarning)
        options.path = str(Path(scratch) / "game.z8")
        tw.make(options)
        return {p.name: p.read_bytes() for p in Path(scratch).iterdir() if p.suffix in (".z8", ".json")}


class TextWorld(Env):
    """A TextWorld game generated at the level's world size, object count and quest length."""

    metadata = EnvMetadata(
        name="TextWorld",
        family=FAMILY,
        domain="other",
        description="TextWorld: a generated text adventure (rooms, objects, a quest) played through commands.",
        action_format="\\boxed{<a TextWorld command>}, e.g. \\boxed{take key from table}",
        max_turns=100,
        reward_range=(-0.1, 1.0),
        extra={"source": "textworld"},
    )
    complexity_params = {"nb_rooms": ROOMS, "nb_objects": OBJECTS, "quest_length": QUEST_LENGTH}

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        self.game_seed = 0
        self.commands: list[str] = []
        self.score = 0
        self.max_score = 1
        self.policy: list[str] = []
        self.admissible: list[str] = []
        self._dir: str | None = None
        self._game: Any = None  # textworld's env (a native interpreter): never copied, rebuilt by replay

    # ----------------------------------------------------------------- game files
    def _workdir(self) -> Path:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="gymverse-textworld-")
            # removed with the env even without close(); a finalizer, not __del__: no ResourceWarning, no cycles
            weakref.finalize(self, shutil.rmtree, self._dir, True)
        return Path(self._dir)

    @property
    def game_file(self) -> Path:
        """The compiled game of the current episode."""
        return self._workdir() / f"game-{self.game_seed}.z8"

    def _make(self) -> None:
        for old in self._workdir().iterdir():  # one game on disk per env
            old.unlink()
        p = self.params
        files = generate(self.game_seed, int(p["nb_rooms"]), int(p["nb_objects"]), int(p["quest_length"]))
        for name, content in files.items():
            (self._workdir() / name.replace("game.", f"game-{self.game_seed}.", 1)).write_bytes(content)

    def _start(self) -> Any:
        """A fresh interpreter on the episode's game, reset; returns TextWorld's first game state."""
        tw = import_suite("textworld", FAMILY)
        self._close_game()
        infos = tw.EnvInfos(**dict.fromkeys(_INFOS, True))
        with warnings.catch_warnings():
            # jericho knows no score table for generated games; TextWorld keeps the score itself (game.json)
            warnings.filterwarnings("ignore", message=r".*is not fully supported")
            self._game = tw.start(str(self.game_file), request_infos=infos)
            return self._game.reset()

    def _close_game(self) -> None:
        if self._game is not None:
            self._game.close()
            self._game = None

    # ----------------------------------------------------------------- episode
    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.game_seed = int(self.rng.integers(0, SEED_SPACE))
        self._close_game()
        self._make()
        state = self._start()
        self.commands, self.score = [], 0
        self.max_score = max(int(state["max_score"]), 1)
        self.policy = list(state["policy_commands"] or [])
        self.admissible = sorted(state["admissible_commands"] or [])
        obs = f"{state['objective']}\n\n{state['description']}".strip()
        return obs, {"game_seed": self.game_seed, "max_score": self.max_score, "params": dict(self.params)}

    def _step(self, action: str) -> StepResult:
        command = " ".join(parse_boxed(action, what="one TextWorld command").split())
        self.commands.append(command)
        state, score, done = self._game.step(command)
        delta, self.score = int(score) - self.score, int(score)
        self.policy = list(state["policy_commands"] or [])
        self.admissible = sorted(state["admissible_commands"] or [])
        won, lost = bool(state["won"]), bool(state["lost"])
        info = {"success": won, "score": self.score, "max_score": self.max_score, "lost": lost}
        return StepResult(str(state.feedback).strip(), delta / self.max_score, bool(done), False, info)

    def solve(self) -> str:
        """The first command of TextWorld's own plan from the current state."""
        if not self.policy:
            raise NotImplementedError("textworld: no policy command from this state (the game is lost or over)")
        return "\\boxed{" + self.policy[0] + "}"

    def sample_random_action(self) -> str:
        """One of TextWorld's admissible commands in this state (sorted, so a seed draws the same one), boxed."""
        commands = self.admissible or ["look"]
        return "\\boxed{" + commands[int(self.rng.integers(0, len(commands)))] + "}"

    def close(self) -> None:
        """Stop the interpreter and remove this env's game files."""
        self._close_game()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # ----------------------------------------------------------------- state: replayed into a fresh interpreter
    def get_state(self) -> dict[str, Any]:
        """Everything but the interpreter and the folder; `set_state` replays the commands on the game file."""
        state = copy.deepcopy({k: v for k, v in self.__dict__.items() if k not in ("_game", "_dir")})
        # the compiled game and its game.json (TextWorld's plan and score tracking read it)
        files = {} if self._needs_reset else {p.name: p.read_bytes() for p in self._workdir().iterdir()}
        state["_game_files"] = files
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a `get_state` snapshot: its game file into this env's folder, its commands replayed."""
        data = dict(state)
        files: dict[str, bytes] = data.pop("_game_files", {})
        self._close_game()
        self.__dict__.update(copy.deepcopy(data))
        if not files:
            return
        for old in self._workdir().iterdir():
            old.unlink()
        for name, content in files.items():
            (self._workdir() / name).write_bytes(content)
        self._start()
        for command in self.commands:
            self._game.step(command)

    def clone(self) -> Env:
        """An independent copy (its own folder and interpreter) in the same state."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update({"_game": None, "_dir": None})
        twin.set_state(self.get_state())
        return twin


def register_envs() -> None:
    """Register ``textworld:TextWorld``."""
    register(f"{FAMILY}:TextWorld", f"{__name__}:TextWorld")
