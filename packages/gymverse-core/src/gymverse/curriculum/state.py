"""`CurriculumState`: the one curriculum of a training run (controller + horizon + boundary selector + mixer).

Rollout workers ask it how to start an episode and report each finished episode; the trainer closes each training
step once. Share it with `gymverse.curriculum.service` (in-process, or a detached named Ray actor).

* ``episode_config(env_id)`` -> `EpisodeConfig` (level from the controller when evolution is on, else None; turn
  cap from the horizon schedule, else ``max_turns``). ``validation=True`` gives the fixed evaluation config
  (``eval_level``, default the controller's initial level; ``eval_max_turns``, default ``max_turns``), so
  validation numbers stay comparable while training levels move.
* ``record(episodes)``: success comes only from trajectories (`Trajectory` or `EpisodeOutcome`), each episode
  once (keyed by ``episode_id``: a padding row repeating an episode does not count twice); void episodes (an env
  or generation failure, `gymverse.failures`) are left out. Report episodes where they finish, before any dynamic
  filtering, so filtering cannot bias the success rate.
* ``end_step()``: once per training step: the controller, boundary selector and horizon schedule see the step's
  per-env success flags; returns a `StepReport`.
* ``state_dict()`` / ``load_state_dict(state)``: levels, streaks, horizon step, boundary statistics, mixer
  position. Loading keeps the running configuration (promote thresholds, schedule, ...) unless
  ``load_config=True``, so a resumed run can change its settings without losing its progress.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gymverse.complexity import check_level
from gymverse.curriculum.boundary import BoundarySelector
from gymverse.curriculum.complexity import ComplexityController, success_by_env
from gymverse.curriculum.horizon import HorizonSchedule, horizon_from_state
from gymverse.curriculum.mixer import EnvMixer
from gymverse.failures import VOID_STOPS
from gymverse.trajectory import Trajectory

STATE_VERSION = 1


@dataclass(frozen=True)
class EpisodeConfig:
    """How to start one episode: level (None: the env's or the dataset's own) and turn cap (None: env budget)."""

    complexity: int | None
    max_turns: int | None


@dataclass(frozen=True)
class EpisodeOutcome:
    """What the curriculum needs of one finished episode (small enough to send to an actor)."""

    episode_id: str
    env_id: str
    success: bool
    error: bool = False  # a void episode (`gymverse.failures`): neither a success nor a failure

    @classmethod
    def of(cls, traj: Trajectory) -> EpisodeOutcome:
        """The outcome of a trajectory (its ``success`` is ``info["success"]`` at the end, never the reward)."""
        if not traj.episode_id:
            raise ValueError(f"{traj.env_id}: trajectory has no episode_id; run it through gymverse.rollout")
        void = traj.error is not None or traj.stop_reason in VOID_STOPS
        return cls(traj.episode_id, traj.env_id, bool(traj.success), void)


@dataclass
class StepReport:
    """One training step's curriculum update."""

    success: dict[str, float] = field(default_factory=dict)  # per-env success rate of the step's episodes
    episodes: int = 0
    changes: list[dict[str, Any]] = field(default_factory=list)  # `LevelChange`s as dicts
    levels: dict[str, int] = field(default_factory=dict)
    horizon: int | None = None


def _outcome(item: Trajectory | EpisodeOutcome) -> EpisodeOutcome:
    return item if isinstance(item, EpisodeOutcome) else EpisodeOutcome.of(item)


class CurriculumState:
    """Controller, horizon schedule, boundary selector and env mixer behind one small API (module docstring)."""

    def __init__(
        self,
        controller: ComplexityController | None = None,
        horizon: HorizonSchedule | None = None,
        *,
        evolution: bool = True,
        max_turns: int | None = None,
        boundary: BoundarySelector | None = None,
        mixer: EnvMixer | None = None,
        eval_level: int | None = None,
        eval_max_turns: int | None = None,
    ) -> None:
        if (max_turns is not None and max_turns < 1) or (eval_max_turns is not None and eval_max_turns < 1):
            raise ValueError(f"max_turns / eval_max_turns must be >= 1 or None, got {max_turns}, {eval_max_turns}")
        self.controller = controller if controller is not None else ComplexityController()
        self.horizon = horizon
        self.evolution = bool(evolution)
        self.max_turns = max_turns
        self.boundary = boundary
        if mixer is not None and mixer.mode == "boundary" and boundary is not None:
            mixer.boundary = boundary  # one selector: the mixer weighs envs by the success recorded here
        self.mixer = mixer
        self.eval_level = check_level(eval_level) if eval_level is not None else None
        self.eval_max_turns = eval_max_turns
        self.history: list[dict[str, Any]] = []
        self._pending: dict[str, EpisodeOutcome] = {}

    # ------------------------------------------------------------------ building from JSON config
    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CurriculumState:
        """Build from JSON config: ``{"controller": {kwargs}, "horizon": {"kind": ..., kwargs}, "evolution",
        "max_turns", "boundary": {kwargs}, "mixer": {"env_ids", "mode", "weights", "seed"}, "eval_level",
        "eval_max_turns"}`` (every key optional; unknown keys are an error naming them)."""
        known = {"controller", "horizon", "evolution", "max_turns", "boundary", "mixer", "eval_level", "eval_max_turns"}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown curriculum setting(s) {unknown}; known: {sorted(known)}")
        horizon = None
        if config.get("horizon") is not None:
            spec = dict(config["horizon"])
            kind = spec.pop("kind", None)
            if kind is None:
                raise ValueError("curriculum horizon needs a 'kind': fixed, stepwise or adaptive")
            horizon = horizon_from_state({"kind": kind, "config": spec, "step": 0})
        boundary = BoundarySelector(**config["boundary"]) if config.get("boundary") is not None else None
        mixer = None
        if config.get("mixer") is not None:
            mix = dict(config["mixer"])
            mixer = EnvMixer(mix.pop("env_ids"), boundary=boundary, **mix)
        return cls(
            ComplexityController(**(config.get("controller") or {})),
            horizon,
            evolution=bool(config.get("evolution", True)),
            max_turns=config.get("max_turns"),
            boundary=boundary,
            mixer=mixer,
            eval_level=config.get("eval_level"),
            eval_max_turns=config.get("eval_max_turns"),
        )

    # ------------------------------------------------------------------ rollout side
    def episode_config(self, env_id: str, *, validation: bool = False) -> EpisodeConfig:
        """Level and turn cap for the next reset of `env_id` (the fixed evaluation config when `validation`)."""
        if validation:
            level = self.eval_level
            if level is None and self.evolution:
                level = self.controller.initial_level
            return EpisodeConfig(level, self.eval_max_turns if self.eval_max_turns is not None else self.max_turns)
        level = self.controller.level(env_id) if self.evolution else None
        cap = self.horizon.horizon() if self.horizon is not None else self.max_turns
        return EpisodeConfig(level, cap)

    def sample_envs(self, n: int) -> list[str]:
        """Env ids for the next `n` episodes from the mixer."""
        if self.mixer is None:
            raise RuntimeError("this curriculum has no EnvMixer (configure 'mixer' with env_ids)")
        return self.mixer.sample(n)

    def record(self, episodes: Iterable[Trajectory | EpisodeOutcome]) -> int:
        """Count finished training episodes for the current step (each once); returns how many were new."""
        new = 0
        for item in episodes:
            out = _outcome(item)
            if out.error or out.episode_id in self._pending:
                continue
            self._pending[out.episode_id] = out
            new += 1
        return new

    # ------------------------------------------------------------------ trainer side
    def end_step(self) -> StepReport:
        """Close one training step: update every component from the recorded episodes, then start a new step."""
        flags: dict[Any, list[bool]] = dict(success_by_env(self._pending.values()))
        self._pending = {}
        report = StepReport({k: sum(v) / len(v) for k, v in flags.items()}, sum(len(v) for v in flags.values()))
        if self.evolution:
            report.changes = [asdict(c) for c in self.controller.update(flags)]
            self.history.extend(report.changes)
        if self.boundary is not None and flags:
            self.boundary.update(dict(flags.items()))
        if self.horizon is not None:
            rate = sum(sum(v) for v in flags.values()) / report.episodes if report.episodes else None
            if rate is None and self.horizon.kind == "adaptive":
                self.horizon.step += 1  # a step without episodes still counts as a step, but measures nothing
            else:
                self.horizon.update(rate)
            report.horizon = self.horizon.horizon()
        report.levels = self.controller.levels()
        return report

    def levels(self) -> dict[str, int]:
        """Current level of every env seen so far."""
        return self.controller.levels()

    def pending(self) -> int:
        """Episodes recorded for the current step so far."""
        return len(self._pending)

    # ------------------------------------------------------------------ checkpoints
    def config(self) -> dict[str, Any]:
        """The JSON config this state was built with (`from_config` input)."""
        out: dict[str, Any] = {
            "controller": self.controller.state_dict()["config"],
            "horizon": {"kind": self.horizon.kind, **self.horizon.config()} if self.horizon is not None else None,
            "evolution": self.evolution,
            "max_turns": self.max_turns,
            "boundary": self.boundary.state_dict()["config"] if self.boundary is not None else None,
            "eval_level": self.eval_level,
            "eval_max_turns": self.eval_max_turns,
            "mixer": None,
        }
        if self.mixer is not None:
            m = self.mixer.state_dict()
            out["mixer"] = {"env_ids": m["env_ids"], "mode": m["mode"], "weights": m["weights"], "seed": m["seed"]}
        return out

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: config, every component's state, level-change history."""
        return {
            "version": STATE_VERSION,
            "config": self.config(),
            "controller": self.controller.state_dict(),
            "horizon": self.horizon.state_dict() if self.horizon is not None else None,
            "boundary": self.boundary.state_dict() if self.boundary is not None else None,
            "mixer": self.mixer.state_dict() if self.mixer is not None else None,
            "history": list(self.history),
        }

    def load_state_dict(self, state: Mapping[str, Any], *, load_config: bool = False) -> None:
        """Restore progress from `state_dict` output; the running config is kept unless `load_config`."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported curriculum state version {state.get('version')!r}")
        if load_config:
            fresh = CurriculumState.from_config(state["config"])
            self.__dict__.update(fresh.__dict__)
        ctrl = dict(state["controller"])
        ctrl["config"] = self.controller.state_dict()["config"]
        self.controller.load_state_dict(ctrl)
        saved_h = state.get("horizon")
        if self.horizon is not None and saved_h is not None:
            if saved_h.get("kind") == self.horizon.kind:
                self.horizon.load_state_dict({**saved_h, "config": self.horizon.config()})
            else:  # another schedule now: keep the training step, start its own counters
                self.horizon.step = int(saved_h["step"])
        if self.boundary is not None and state.get("boundary") is not None:
            self.boundary.load_state_dict({**state["boundary"], "config": self.boundary.state_dict()["config"]})
        saved_m = state.get("mixer")
        if self.mixer is not None and saved_m is not None and saved_m["env_ids"] == self.mixer.env_ids:
            mine = self.mixer.state_dict()
            self.mixer.load_state_dict({**mine, "position": saved_m["position"], "rng": saved_m["rng"]})
        self.history = list(state.get("history", []))
        self._pending = {}
