"""`EnvMixer`: which env ids fill the next batch.

* ``round_robin`` (the reference's default): ``env_ids[(p + i) % E]`` for the ``i``-th slot, ``p`` advancing
  by the batch size, so every env gets the same share over time.
* ``weighted``: i.i.d. draws with probability ``w_e / sum(w)`` from the mixer's own seeded RNG.
* ``boundary``: like ``weighted`` with ``w_e`` from a `BoundarySelector` (success near its alpha), re-read on
  every call; if every weight is 0 the draw is uniform.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from gymverse.curriculum.boundary import BoundarySelector

Mode = Literal["round_robin", "weighted", "boundary"]
STATE_VERSION = 1


class EnvMixer:
    """Chooses env ids for the next batch; deterministic given the seed, resumable through `state_dict`."""

    def __init__(
        self,
        env_ids: Sequence[str],
        mode: Mode = "round_robin",
        *,
        weights: Sequence[float] | Mapping[str, float] | None = None,
        boundary: BoundarySelector | None = None,
        seed: int = 0,
    ) -> None:
        self.env_ids = list(env_ids)
        if not self.env_ids or len(set(self.env_ids)) != len(self.env_ids):
            raise ValueError(f"env_ids must be non-empty and unique, got {self.env_ids}")
        if mode not in ("round_robin", "weighted", "boundary"):
            raise ValueError(f"unknown mode {mode!r}; use 'round_robin', 'weighted' or 'boundary'")
        self.mode: Mode = mode
        self.boundary = boundary
        if mode == "boundary" and boundary is None:
            raise ValueError("mode='boundary' needs a BoundarySelector (boundary=...)")
        self.weights: list[float] | None = None
        if weights is not None:
            w = [float(weights[e]) for e in self.env_ids] if isinstance(weights, Mapping) else list(map(float, weights))
            if len(w) != len(self.env_ids) or min(w) < 0 or sum(w) <= 0:
                raise ValueError(f"weights must be {len(self.env_ids)} non-negative numbers with a positive sum")
            self.weights = w
        elif mode == "weighted":
            raise ValueError("mode='weighted' needs weights=")
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)
        self.position = 0

    def _probs(self) -> np.ndarray:
        if self.mode == "boundary" and self.boundary is not None:
            w = np.asarray(self.boundary.weights(self.env_ids), dtype=float)
        else:
            w = np.asarray(self.weights, dtype=float)
        total = w.sum()
        return w / total if total > 0 else np.full(len(w), 1.0 / len(w))

    def sample(self, n: int) -> list[str]:
        """Env ids for a batch of `n` episodes."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if self.mode == "round_robin":
            e = len(self.env_ids)
            out = [self.env_ids[(self.position + i) % e] for i in range(n)]
            self.position = (self.position + n) % e
            return out
        idx = self.rng.choice(len(self.env_ids), size=n, p=self._probs())
        return [self.env_ids[int(i)] for i in idx]

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: config, round-robin position and RNG state (the boundary selector saves itself)."""
        return {
            "version": STATE_VERSION,
            "env_ids": list(self.env_ids),
            "mode": self.mode,
            "weights": self.weights,
            "seed": self.seed,
            "position": self.position,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict` output (keeps the attached `BoundarySelector`)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported EnvMixer state version {state.get('version')!r}")
        self.__init__(  # type: ignore[misc]
            state["env_ids"], state["mode"], weights=state["weights"], boundary=self.boundary, seed=state["seed"]
        )
        self.position = int(state["position"])
        self.rng.bit_generator.state = dict(state["rng"])
