r"""BabyAI (in ``minigrid``) as a text env: ``babyai:BabyAI`` (``pip install 'gymverse-suites[babyai]'``).

minigrid builds and runs the level; this module only renders its egocentric 7x7 view and mission as text and
maps text actions onto minigrid's actions.

* **Complexity.** Level ``k`` plays `LEVELS`\[k-1\], ten BabyAI levels in the order of the BabyAI paper's
  curriculum (one room, one object -> one room with distractors -> nine rooms -> the boss level).
* **Actions.** ``\boxed{<action>}`` with one of `ACTIONS` (``turn left``, ``move forward``, ``pick up``, ...).
* **Observation.** The mission, then every object in view as "a red ball 2 steps forward and 1 step to your
  left", the carried object, and what is directly in front (a wall, a closed door, ...).
* **Reward and success.** minigrid's own: ``1 - 0.9 * steps / max_steps`` on success, 0 otherwise; success is an
  episode minigrid terminates with a positive reward. The turn budget is the level's ``max_steps``.
* **Oracle.** minigrid's ``BabyAIBot``, fed every action taken so it stays in step with the episode.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from gymverse.actions import ActionFormatError, parse_boxed
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.registry import register

from gymverse_suites._common import SEED_SPACE, import_suite

FAMILY = "babyai"
#: BabyAI levels ordered by difficulty (the BabyAI paper's level sequence), one per complexity level.
LEVELS: tuple[str, ...] = (
    "GoToRedBallGrey",
    "GoToRedBall",
    "GoToLocal",
    "PickupLoc",
    "PutNextLocal",
    "GoTo",
    "Pickup",
    "UnblockPickup",
    "Synth",
    "BossLevel",
)
#: Text action -> minigrid ``Actions`` value (left, right, forward, pickup, drop, toggle, done).
ACTIONS: dict[str, int] = {
    "turn left": 0,
    "turn right": 1,
    "move forward": 2,
    "pick up": 3,
    "drop": 4,
    "toggle": 5,
    "done": 6,
}
_ACTION_NAMES = {v: k for k, v in ACTIONS.items()}
_VIEW = 7  # minigrid's default agent view size
_STATES = {0: "open", 1: "closed", 2: "locked"}


def _minigrid_level(name: str, seed: int) -> Any:
    """A fresh, unwrapped minigrid BabyAI level (no gymnasium checker wrappers: they warn and copy)."""
    gym = import_suite("gymnasium", "babyai")
    import_suite("minigrid", "babyai")  # registers the BabyAI-* ids
    env = gym.make(f"BabyAI-{name}-v0").unwrapped
    # minigrid prints every rejected room sample ("Sampling rejected: ...") to stdout: not an observation
    with contextlib.redirect_stdout(io.StringIO()):
        env.reset(seed=seed)
    return env


def _steps(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def describe(env: Any) -> str:
    """The agent's view as text: objects in its 7x7 egocentric view, what it carries and what is in front."""
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT

    image = env.gen_obs()["image"]
    lines: list[str] = []
    for j in range(_VIEW):
        for i in range(_VIEW):
            kind = IDX_TO_OBJECT[int(image[i, j, 0])]
            if kind in ("unseen", "empty", "wall", "floor", "agent"):
                continue
            color = IDX_TO_COLOR[int(image[i, j, 1])]
            state = f" ({_STATES[int(image[i, j, 2])]})" if kind == "door" else ""
            fwd, side = _VIEW - 1 - j, i - _VIEW // 2
            where = [_steps(fwd, "step forward", "steps forward")] if fwd else []
            if side:
                where.append(f"{_steps(abs(side), 'step', 'steps')} to your {'right' if side > 0 else 'left'}")
            lines.append(f"a {color} {kind}{state} {' and '.join(where) or 'right here'}")
    seen = "You see " + "; ".join(lines) + "." if lines else "You see no objects."
    front = env.grid.get(*env.front_pos)
    ahead = "nothing" if front is None else f"a {front.color} {front.type}" if front.type != "wall" else "a wall"
    if front is not None and front.type == "door":
        ahead += " (open)" if front.is_open else " (locked)" if front.is_locked else " (closed)"
    carrying = f"a {env.carrying.color} {env.carrying.type}" if env.carrying else "nothing"
    return f"{seen}\nDirectly in front of you: {ahead}. You are carrying {carrying}."


class BabyAI(Env):
    """A BabyAI level chosen by complexity, played through text."""

    metadata = EnvMetadata(
        name="BabyAI",
        family=FAMILY,
        domain="other",  # GymVerse's domains name its own families (synth seeds its "game" domain from them)
        description="BabyAI grid-world missions (minigrid) with a text view; levels ordered by difficulty.",
        action_format=r"\boxed{turn left|turn right|move forward|pick up|drop|toggle|done}",
        max_turns=64,
        reward_range=(-0.1, 1.0),
        extra={"source": "minigrid", "levels": list(LEVELS)},
    )
    complexity_params = {"level_index": list(range(len(LEVELS)))}

    def __init__(self, complexity: int = 1, seed: int | None = None, max_turns: int | None = None) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        self.level = LEVELS[0]
        self.minigrid_seed = 0
        self.mission = ""
        self._grid: Any = None
        self._bot: Any = None
        self._bot_synced = False
        self._last_action: int | None = None
        self._suggested: int | None = None

    @property
    def max_turns(self) -> int:
        """The level's own step budget (minigrid's ``max_steps``) unless overridden."""
        if self._max_turns_override is not None or self._grid is None:
            return super().max_turns
        return int(self._grid.max_steps)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.level = LEVELS[int(self.params["level_index"])]
        self.minigrid_seed = int(self.rng.integers(0, SEED_SPACE))
        self._grid = _minigrid_level(self.level, self.minigrid_seed)
        self.mission = str(self._grid.mission)
        self._bot, self._bot_synced, self._last_action, self._suggested = None, False, None, None
        obs = f"Mission: {self.mission}\n{describe(self._grid)}"
        return obs, {"level": self.level, "minigrid_seed": self.minigrid_seed, "mission": self.mission}

    def _step(self, action: str) -> StepResult:
        text = " ".join(parse_boxed(action, what="one action").lower().split())
        if text not in ACTIONS:
            raise ActionFormatError(f"unknown action {text!r}; use one of: {', '.join(ACTIONS)}")
        move = ACTIONS[text]
        # the bot replans from the action actually taken; a step it did not see puts it out of sync
        self._bot_synced = self._bot is not None and self._suggested is not None
        self._last_action, self._suggested = move, None
        _, reward, terminated, truncated, _ = self._grid.step(move)
        success = bool(terminated and reward > 0)
        obs = f"Mission: {self.mission}\n{describe(self._grid)}"
        if terminated:
            obs += "\nMission complete." if success else "\nThe episode is over."
        return StepResult(obs, float(reward), bool(terminated), bool(truncated), {"success": success})

    def solve(self) -> str:
        """minigrid's BabyAIBot's next action (the bot is rebuilt when it missed a step)."""
        if self._suggested is None:
            from minigrid.utils.baby_ai_bot import BabyAIBot

            if self._bot is None or not self._bot_synced:
                self._bot = BabyAIBot(self._grid)
                self._suggested = int(self._bot.replan())
            else:
                self._suggested = int(self._bot.replan(self._last_action))
        return "\\boxed{" + _ACTION_NAMES[self._suggested] + "}"

    def sample_random_action(self) -> str:
        """A random movement action (turn or move forward), boxed."""
        return "\\boxed{" + _ACTION_NAMES[int(self.rng.integers(0, 3))] + "}"


def register_envs() -> None:
    """Register ``babyai:BabyAI``."""
    register(f"{FAMILY}:BabyAI", "gymverse_suites.babyai:BabyAI")
