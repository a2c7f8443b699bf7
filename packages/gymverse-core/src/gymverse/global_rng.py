"""Python's and NumPy's process-global generators: one lock for code that swaps or reads them, private states for
envs written against them (GEM), and snapshots for the checker's "leaves them untouched" check.

Threads share these generators. A swap (`GlobalRngScope`) holds `LOCK` from swapping in to swapping back, and a
judgement (`judging`) reads them only under `LOCK`: outside it the globals never show a swapped-in state. `LOCK` is
never held across a judged env's own calls, so an env that hangs in one thread cannot stall every other thread.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Held while a thread swaps the global generators in and out, or reads them to judge an env.
LOCK = threading.RLock()


class GlobalRngScope:
    """Private states for the global ``random`` and ``numpy.random`` generators of one adapter."""

    def __init__(self, seed: int) -> None:
        self.py_state = random.Random(seed).getstate()
        self.np_state = np.random.RandomState(seed).get_state(legacy=False)

    @contextmanager
    def active(self, numpy: bool = True) -> Iterator[None]:
        """Swap the private states in for the duration of the block (the legacy global API is the point here).

        ``numpy=False`` leaves NumPy's generator alone: for calls into code that cannot reach it (a file that never
        imports numpy, outside reset, where GEM seeds both); the NumPy swap is most of the cost of a GEM step.
        """
        # the dict form (legacy=False) carries the same state as the legacy tuple at a third of the cost
        with LOCK:
            saved_py = random.getstate()
            random.setstate(self.py_state)
            if numpy:
                saved_np = np.random.get_state(legacy=False)  # noqa: NPY002
                np.random.set_state(self.np_state)  # noqa: NPY002
            try:
                yield
            finally:
                self.py_state = random.getstate()
                random.setstate(saved_py)
                if numpy:
                    self.np_state = np.random.get_state(legacy=False)  # noqa: NPY002
                    np.random.set_state(saved_np)  # noqa: NPY002


@dataclass
class GlobalRngSnapshot:
    """The state of Python's and NumPy's global generators."""

    py: object
    np_state: tuple[Any, ...]

    @classmethod
    def take(cls) -> GlobalRngSnapshot:
        """Snapshot both global generators now."""
        return cls(random.getstate(), tuple(np.random.get_state(legacy=True)))  # noqa: NPY002 - reading it is the point

    @staticmethod
    def restore(snapshot: GlobalRngSnapshot) -> None:
        """Put both global generators back into `snapshot`'s state."""
        random.setstate(snapshot.py)  # type: ignore[arg-type]
        np.random.set_state(snapshot.np_state)  # noqa: NPY002

    @classmethod
    def sentinel(cls) -> GlobalRngSnapshot:
        """Move both global generators to a state no env would produce by seeding, and snapshot it.

        Without this, an env that reseeds the global generator with the episode seed leaves the same state after
        every episode, so a before/after comparison would miss it.
        """
        random.seed("gymverse.checker sentinel")
        np.random.seed(0x6E57_C0DE)  # noqa: NPY002
        return cls.take()

    def changed(self) -> list[str]:
        """Which global generators differ from this snapshot."""
        out = []
        if random.getstate() != self.py:
            out.append("random")
        now: tuple[Any, ...] = tuple(np.random.get_state(legacy=True))  # noqa: NPY002
        same = now[0] == self.np_state[0] and np.array_equal(now[1], self.np_state[1]) and now[2:] == self.np_state[2:]
        if not same:
            out.append("numpy.random")
        return out


_judging = 0
_callers: GlobalRngSnapshot | None = None


@contextmanager
def judging() -> Iterator[Callable[[], list[str]]]:
    """Judge the code run in the block: yields ``changed()``, which global generators moved since the block began.

    The first judgement in the process moves them to `GlobalRngSnapshot.sentinel` (an env that reseeds them cannot
    return them to it) and the last one puts the caller's state back, so judgements in several threads at once
    never undo each other's starting point.
    """
    global _judging, _callers
    with LOCK:
        if _judging == 0:
            _callers = GlobalRngSnapshot.take()
            GlobalRngSnapshot.sentinel()
        _judging += 1
        before = GlobalRngSnapshot.take()

    def changed() -> list[str]:
        with LOCK:
            return before.changed()

    try:
        yield changed
    finally:
        with LOCK:
            _judging -= 1
            if _judging == 0 and _callers is not None:
                GlobalRngSnapshot.restore(_callers)
                _callers = None


__all__ = ["LOCK", "GlobalRngScope", "GlobalRngSnapshot", "judging"]
