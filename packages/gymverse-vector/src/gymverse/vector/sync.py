"""`SyncVecEnv`: the envs stepped one after another in the caller's thread."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gymverse.pool.slot import EnvRecipe, EnvSlot
from gymverse.vector.base import InProcessVecEnv, VecOptions, VecStepResult, collect_resets

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Unpack


class SyncVecEnv(InProcessVecEnv):
    """A plain loop over `EnvSlot`s; the reference every other backend must match transcript for transcript.

    ``step_timeout`` is enforced with ``SIGALRM`` (interrupting a hung call with `StepTimeout`), which Python only
    allows on the main thread; use the process backend to contain hangs anywhere else or in native code.
    """

    backend = "sync"

    def __init__(self, recipes: Sequence[EnvRecipe], **options: Unpack[VecOptions]) -> None:
        super().__init__(recipes, **options)
        if self.step_timeout is not None and threading.current_thread() is not threading.main_thread():
            raise ValueError(
                "the sync backend enforces step_timeout with SIGALRM, which only works on the main thread; "
                "use backend='process' (or 'async') to bound env calls from other threads"
            )
        self.slots = [EnvSlot(r, s, self.autoreset, self.step_timeout) for r, s in zip(self.recipes, self.seeds)]

    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        slots = self.slots
        return collect_resets(slots[i].reset(s) for i, s in zip(indices, seeds))

    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        slots = self.slots
        return VecStepResult.collect(indices, [slots[i].step(a) for i, a in zip(indices, actions)])
