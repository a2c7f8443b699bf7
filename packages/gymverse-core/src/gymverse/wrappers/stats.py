"""`EpisodeStatsWrapper` (per-episode metrics and running aggregates) and `TimeLimit` (turn budget)."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from gymverse.core import StepResult, Wrapper
from gymverse.protocol import EnvLike


class EpisodeStatsWrapper(Wrapper):
    """At episode end add ``info["episode"] = {return, length, success, format_errors, time}``; keep aggregates.

    ``time`` is wall-clock seconds from `reset` to the last step (``time.perf_counter``), so it is the only field
    that differs between two runs of the same seed. An episode abandoned by an early `reset` is not counted.
    Place it outside `TimeLimit` so that the time limit's truncations are seen as episode ends.

    Args:
        env: the env to wrap.
        recent: how many of the latest episodes `stats` uses for its ``recent_*`` figures.
    """

    def __init__(self, env: EnvLike, recent: int = 100) -> None:
        super().__init__(env)
        if isinstance(recent, bool) or not isinstance(recent, int) or recent < 1:
            raise ValueError(f"recent must be a positive integer, got {recent!r}")
        self._recent: deque[dict[str, Any]] = deque(maxlen=recent)
        self._episodes = 0
        self._sums = {"return": 0.0, "length": 0.0, "success": 0.0, "format_errors": 0.0, "time": 0.0}
        self._start_episode()
        self._running = False

    def _start_episode(self) -> None:
        self._ep_return = 0.0
        self._ep_length = 0
        self._ep_format_errors = 0
        self._ep_start = time.perf_counter()
        self._running = True

    @property
    def episode_count(self) -> int:
        """Finished episodes seen so far."""
        return self._episodes

    @property
    def stats(self) -> dict[str, float]:
        """Running aggregates over all finished episodes, plus ``recent_*`` over the latest ones."""
        n = self._episodes
        out: dict[str, float] = {"episodes": float(n)}
        for key, total in self._sums.items():
            out[f"mean_{key}" if key != "success" else "success_rate"] = total / n if n else 0.0
        out["format_error_rate"] = self._sums["format_errors"] / self._sums["length"] if self._sums["length"] else 0.0
        if self._recent:
            out["recent_success_rate"] = sum(e["success"] for e in self._recent) / len(self._recent)
            out["recent_mean_return"] = sum(e["return"] for e in self._recent) / len(self._recent)
        return out

    @property
    def recent_episodes(self) -> list[dict[str, Any]]:
        """The latest finished episodes' ``info["episode"]`` records, oldest first."""
        return [dict(e) for e in self._recent]

    def reset_stats(self) -> None:
        """Forget every aggregate (the current episode keeps counting)."""
        self._episodes = 0
        self._sums = dict.fromkeys(self._sums, 0.0)
        self._recent.clear()

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the wrapped env and start counting a new episode."""
        out = self.env.reset(seed=seed)
        self._start_episode()
        return out

    def step(self, action: str) -> StepResult:
        """Step the wrapped env and, at the episode's end, attach ``info["episode"]``."""
        res = self.env.step(action)
        if not self._running:
            return res
        self._ep_return += float(res.reward)
        self._ep_length += 1
        self._ep_format_errors += int(bool(res.info.get("format_error", False)))
        if res.terminated or res.truncated:
            episode = {
                "return": self._ep_return,
                "length": self._ep_length,
                "success": bool(res.info.get("success", False)),
                "format_errors": self._ep_format_errors,
                "time": time.perf_counter() - self._ep_start,
            }
            res.info["episode"] = episode
            self._episodes += 1
            for key in self._sums:
                self._sums[key] += float(episode[key])
            self._recent.append(dict(episode))
            self._running = False
        return res


class TimeLimit(Wrapper):
    """Truncate the episode after `max_turns` steps of this wrapper, with ``info["TimeLimit.truncated"] = True``.

    A truncated episode is over for the wrapper (`done` is True, another `step` raises) even though the wrapped
    env did not end it; ``info["success"]`` is then False unless the step itself reported success.
    """

    def __init__(self, env: EnvLike, max_turns: int) -> None:
        super().__init__(env)
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer, got {max_turns!r}")
        self._limit = max_turns
        self._elapsed = 0
        self._cut = False

    @property
    def max_turns(self) -> int:
        """The tighter of this limit and the wrapped env's own budget."""
        return min(self._limit, self.env.max_turns)

    @property
    def elapsed(self) -> int:
        """Steps taken in the current episode."""
        return self._elapsed

    @property
    def done(self) -> bool:
        """True when this wrapper truncated the episode or the wrapped env ended it."""
        return self._cut or bool(self.env.done)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the wrapped env and the turn counter."""
        out = self.env.reset(seed=seed)
        self._elapsed = 0
        self._cut = False
        return out

    def step(self, action: str) -> StepResult:
        """Step the wrapped env; truncate when the limit is reached and the episode is still running."""
        if self._cut:
            raise RuntimeError(
                f"{type(self).__name__}: step() called after the episode was truncated at {self._limit} turns; "
                "call reset()"
            )
        res = self.env.step(action)
        self._elapsed += 1
        obs, reward, terminated, truncated, info = res
        if not terminated and not truncated and self._elapsed >= self._limit:
            truncated = True
            self._cut = True
            info["TimeLimit.truncated"] = True
            info["success"] = bool(info.get("success", False))
            obs = f"{obs}\nTurn limit of {self._limit} reached."
        return StepResult(obs, reward, terminated, truncated, info)
