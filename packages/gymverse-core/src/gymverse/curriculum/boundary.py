"""Capability-boundary selection (GenEnv): prefer tasks whose measured success is near a target ``alpha``.

Success per task is a decayed running estimate: after each `update`, ``succ <- decay * succ + successes`` and
``att <- decay * att + attempts``, and ``s = succ / att`` (``decay = 1`` is the plain cumulative rate). A task
never measured has ``s = prior`` (default ``alpha``: unknown tasks count as on the boundary, so they get tried).

* weight: ``w(s) = floor + (1 - floor) * exp(-sharpness * (s - alpha)^2)``; ``sharpness = 0`` is uniform.
* keep: tasks with ``|s - alpha| <= band``.
* rank trimming (``filtering_k``): keep the ``round(N * k)`` tasks closest to ``alpha`` (ties: input order),
  but never fewer than 1 of a non-empty list. GenEnv keeps ``int(N * k)`` and so drops every prompt when
  ``N * k < 1``; rounding half up also avoids its bias toward dropping one more than asked.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

STATE_VERSION = 1


def trim_count(n: int, k: float) -> int:
    """How many of `n` items rank trimming keeps: ``min(n, max(1, floor(n*k + 0.5)))`` (0 when n == 0)."""
    if not 0.0 < k <= 1.0:
        raise ValueError(f"filtering_k must be in (0, 1], got {k}")
    if n <= 0:
        return 0
    return min(n, max(1, math.floor(n * k + 0.5)))


def rank_trim_indices(success: Sequence[float], k: float, alpha: float = 0.5) -> list[int]:
    """Indices (in input order) of the `trim_count` entries whose success is closest to `alpha`."""
    keep = trim_count(len(success), k)
    order = sorted(range(len(success)), key=lambda i: (abs(float(success[i]) - alpha), i))
    return sorted(order[:keep])


class BoundarySelector:
    """Weights, keeps or trims tasks (or env ids) by measured success near `alpha`."""

    def __init__(
        self,
        alpha: float = 0.5,
        sharpness: float = 8.0,
        floor: float = 0.0,
        decay: float = 0.9,
        prior: float | None = None,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if sharpness < 0 or not 0.0 <= floor <= 1.0 or not 0.0 < decay <= 1.0:
            raise ValueError("need sharpness >= 0, 0 <= floor <= 1 and 0 < decay <= 1")
        self.alpha, self.sharpness, self.floor, self.decay = float(alpha), float(sharpness), float(floor), float(decay)
        self.prior = float(alpha if prior is None else prior)
        self._succ: dict[Hashable, float] = {}
        self._att: dict[Hashable, float] = {}

    def update(self, results: Mapping[Hashable, Sequence[bool] | tuple[float, float]]) -> None:
        """Add results: ``{task: [success flags]}`` or ``{task: (successes, attempts)}``; decays all tasks."""
        for task in self._succ:
            self._succ[task] *= self.decay
            self._att[task] *= self.decay
        for task, res in results.items():
            if isinstance(res, tuple) and len(res) == 2 and not isinstance(res[0], bool):
                succ, att = float(res[0]), float(res[1])
            else:
                flags = list(res)
                succ, att = float(sum(bool(f) for f in flags)), float(len(flags))
            if att < 0 or not 0 <= succ <= att:
                raise ValueError(f"{task!r}: need 0 <= successes <= attempts, got {succ}, {att}")
            self._succ[task] = self._succ.get(task, 0.0) + succ
            self._att[task] = self._att.get(task, 0.0) + att

    def success(self, task: Hashable) -> float:
        """Estimated success of `task` (`prior` if never measured)."""
        att = self._att.get(task, 0.0)
        return self._succ[task] / att if att > 0 else self.prior

    def weight_of(self, success: float) -> float:
        """``floor + (1 - floor) * exp(-sharpness * (success - alpha)^2)``."""
        return self.floor + (1.0 - self.floor) * math.exp(-self.sharpness * (success - self.alpha) ** 2)

    def weights(self, tasks: Sequence[Hashable]) -> list[float]:
        """Sampling weights of `tasks` (unnormalized)."""
        return [self.weight_of(self.success(t)) for t in tasks]

    def keep(self, tasks: Sequence[Hashable], band: float = 0.3) -> list[Hashable]:
        """Tasks with ``|success - alpha| <= band``, in input order."""
        return [t for t in tasks if abs(self.success(t) - self.alpha) <= band + 1e-12]

    def rank_trim(self, tasks: Sequence[Hashable], k: float) -> list[Hashable]:
        """The `trim_count(len(tasks), k)` tasks closest to `alpha`, in input order."""
        idx = rank_trim_indices([self.success(t) for t in tasks], k, self.alpha)
        return [tasks[i] for i in idx]

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state (task keys kept with their type as ``[key, successes, attempts]`` rows)."""
        return {
            "version": STATE_VERSION,
            "config": {
                "alpha": self.alpha,
                "sharpness": self.sharpness,
                "floor": self.floor,
                "decay": self.decay,
                "prior": self.prior,
            },
            "tasks": [[k, self._succ[k], self._att[k]] for k in self._succ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported BoundarySelector state version {state.get('version')!r}")
        self.__init__(**state["config"])  # type: ignore[misc]
        for key, succ, att in state["tasks"]:
            self._succ[key], self._att[key] = float(succ), float(att)
