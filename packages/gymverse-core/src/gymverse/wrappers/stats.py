"""`EpisodeStatsWrapper`: per-episode metrics and running aggregates."""

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
