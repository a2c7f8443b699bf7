"""The vector-env API shared by every backend.

Results are returned without copying: observations and infos are the objects the envs produced (the process and
Ray backends necessarily deserialize them once; nothing is deep-copied per step).

Autoreset (default ``"same_step"``, chosen because it never spends a model call on a throwaway action):

* ``"same_step"``: when an episode ends, the env is reset inside the same ``step`` call. The returned observation
  is the first observation of the new episode; ``terminated``/``truncated``/``reward`` describe the step that ended
  the old one, whose last observation and info are kept in ``info["final_observation"]`` / ``info["final_info"]``.
* ``"next_step"``: the step that ends an episode returns its final observation as usual; the next ``step`` on
  that env ignores its action, resets, and returns the first observation (reward 0, ``info["autoreset"] = True``).
* ``"disabled"``: a finished env must be reset explicitly (``reset(indices=[i])``); stepping it is an error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from gymverse.complexity import check_level
from gymverse.pool.faults import VectorError
from gymverse.pool.slot import AUTORESET_MODES, AutoresetMode, EnvRecipe, EnvSlot, base_seeds, check_step_timeout

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Unpack

Actions = Sequence[Any] | Mapping[int, Any]


@dataclass
class VecStepResult:
    """Batched step results for the envs in `indices` (all envs for a list of actions). Unpacks as 5 values."""

    observations: list[str]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: list[dict[str, Any]]
    indices: list[int]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.observations, self.rewards, self.terminated, self.truncated, self.infos))

    def __len__(self) -> int:
        return len(self.indices)

    @classmethod
    def collect(
        cls, indices: list[int], steps: Sequence[tuple[str, float, bool, bool, dict[str, Any]]]
    ) -> VecStepResult:
        """Assemble per-env 5-tuples (in `indices` order) into batched arrays."""
        obs, rew, term, trunc, infos = zip(*steps) if steps else ((), (), (), (), ())
        return cls(
            list(obs),
            np.fromiter(rew, dtype=np.float64, count=len(indices)),
            np.fromiter(term, dtype=bool, count=len(indices)),
            np.fromiter(trunc, dtype=bool, count=len(indices)),
            list(infos),
            indices,
        )


def collect_resets(
    resets: Iterable[tuple[str, dict[str, Any]]],
) -> tuple[list[str], list[dict[str, Any]]]:
    """Assemble per-env ``(observation, info)`` pairs (in `indices` order) into the batched reset result."""
    obs: list[str] = []
    infos: list[dict[str, Any]] = []
    for o, info in resets:
        obs.append(o)
        infos.append(info)
    return obs, infos


def check_autoreset(mode: str) -> AutoresetMode:
    """Validate an autoreset mode name."""
    if mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset must be one of {AUTORESET_MODES}, got {mode!r}")
    return mode  # type: ignore[return-value]


class VecOptions(TypedDict, total=False):
    """The options every backend takes, as keywords (`make_vec` passes them through); each may be left out."""

    #: ``"same_step"`` (the default), ``"next_step"`` or ``"disabled"`` (see this module's docstring).
    autoreset: str
    #: Env ``i`` gets base seed ``seed + i``; None (the default) draws fresh entropy.
    seed: int | None
    #: Positive seconds one env call may take before it is stopped and blamed on its env; None: no limit.
    step_timeout: float | None


class VecEnv(ABC):
    """N text envs stepped together. Subclasses implement the `_reset`/`_step`/`_set_complexity`/`_close` hooks."""

    backend: str = "abstract"

    def __init__(self, recipes: Sequence[EnvRecipe], **options: Unpack[VecOptions]) -> None:
        """Validate the options every backend shares (`VecOptions`)."""
        for name in options:  # `Unpack` is checked by mypy only; keep Python's error for a misspelt option
            if name not in VecOptions.__annotations__:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {name!r}")
        if not recipes:
            raise ValueError("a vector env needs at least one env")
        self.recipes = list(recipes)
        self.num_envs = len(recipes)
        self.env_ids = [r.env_id for r in recipes]
        self.autoreset: AutoresetMode = check_autoreset(options.get("autoreset", "same_step"))
        self.step_timeout = check_step_timeout(options.get("step_timeout"))
        self.seeds = base_seeds(options.get("seed"), self.num_envs)
        self.closed = False

    # ------------------------------------------------------------------ validation
    def _check_open(self) -> None:
        if self.closed:
            raise VectorError(f"{type(self).__name__} is closed")

    def _indices(self, indices: Sequence[int] | None) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        out = [int(i) for i in indices]
        bad = [i for i in out if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range 0..{self.num_envs - 1}")
        if len(set(out)) != len(out):
            raise ValueError(f"duplicate env indices in {out}")
        return out

    def _normalize(self, actions: Actions) -> tuple[list[int], list[Any]]:
        if type(actions) is list and len(actions) == self.num_envs:  # the common case, without ABC isinstance checks
            return list(range(self.num_envs)), actions.copy()
        if isinstance(actions, Mapping):
            indices = self._indices(list(actions))
            return indices, [actions[i] for i in indices]
        if isinstance(actions, str | bytes) or not isinstance(actions, Sequence):
            raise TypeError(
                f"actions must be a list of {self.num_envs} actions or a dict {{env_index: action}}, "
                f"got {type(actions).__name__}"
            )
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs (use a dict to step a subset)")
        return list(range(self.num_envs)), list(actions)

    # ------------------------------------------------------------------ public API
    def reset(
        self, seed: int | Sequence[int] | None = None, indices: Sequence[int] | None = None
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Reset the envs in `indices` (default all); an int seed gives the ``k``-th of them ``seed + k``."""
        return self._reset(*self._prepare_reset(seed, indices))

    def _prepare_reset(
        self, seed: int | Sequence[int] | None, indices: Sequence[int] | None
    ) -> tuple[list[int], list[int | None]]:
        self._check_open()
        idx = self._indices(indices)
        seeds: list[int | None]
        if seed is None:
            seeds = [None] * len(idx)
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            seeds = [int(seed) + k for k in range(len(idx))]
        elif isinstance(seed, Sequence) and not isinstance(seed, str | bytes):
            if len(seed) != len(idx):
                raise ValueError(f"got {len(seed)} seeds for {len(idx)} envs")
            seeds = [int(s) for s in seed]
        else:
            raise TypeError(f"seed must be an int, a list of ints or None, got {type(seed).__name__}")
        return idx, seeds

    def step(self, actions: Actions) -> VecStepResult:
        """Step every env (a list of `num_envs` actions) or only the envs named in a dict ``{index: action}``."""
        return self._step(*self._prepare_step(actions))

    def _prepare_step(self, actions: Actions) -> tuple[list[int], list[Any]]:
        self._check_open()
        indices, acts = self._normalize(actions)
        if self.autoreset == "disabled":
            done = [i for i in indices if self._is_ended(i)]
            if done:
                raise VectorError(f"envs {done} finished their episode and autoreset is disabled; reset them first")
        return indices, acts

    def set_complexity(self, level: int, indices: Sequence[int] | None = None) -> None:
        """Set complexity `level` (1..10) for the envs in `indices` (default all), effective at their next reset."""
        self._check_open()
        self._set_complexity(check_level(level), self._indices(indices))

    def close(self) -> None:
        """Release every env and worker; calling it again is a no-op."""
        if self.closed:
            return
        self.closed = True
        self._close()

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs

    def __repr__(self) -> str:
        return f"<{type(self).__name__} n={self.num_envs} autoreset={self.autoreset}{' closed' if self.closed else ''}>"

    # ------------------------------------------------------------------ backend hooks
    @abstractmethod
    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        """Reset `indices`; a None seed continues with the env's next episode seed."""

    @abstractmethod
    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        """Step `indices` with `actions` (validated)."""

    @abstractmethod
    def _set_complexity(self, level: int, indices: list[int]) -> None:
        """Record a pending level."""

    @abstractmethod
    def _is_ended(self, index: int) -> bool:
        """Whether env `index` needs a reset."""

    @abstractmethod
    def _close(self) -> None:
        """Release resources (called once)."""


class InProcessVecEnv(VecEnv):
    """A backend whose envs live in this process as `self.slots`; supplies the per-slot hooks."""

    slots: list[EnvSlot]

    def _set_complexity(self, level: int, indices: list[int]) -> None:
        for i in indices:
            self.slots[i].set_complexity(level)

    def _is_ended(self, index: int) -> bool:
        return self.slots[index].ended

    def _close(self) -> None:
        for slot in self.slots:
            slot.close()
