"""The env host that runs inside a process worker or a Ray actor, and the process worker's main loop.

A worker hosts several env slots (amortizing one message per batch over many envs). Before each env call it
writes ``(env index, start time)`` into a small shared array, so the parent can tell which env hung or was
running when the worker died, without any extra message on the happy path.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
import traceback
from collections.abc import Sequence
from typing import Any

from gymverse.pool.faults import WORKER_ENV_FLAG, InjectedFault
from gymverse.pool.slot import AutoresetMode, EnvRecipe, EnvSlot, EnvStep, SlotMeta

StepItem = tuple[int, Any]
ResetItem = tuple[int, int | None, InjectedFault | None]
RestoreItem = tuple[int, SlotMeta, Sequence[Any]]


class WorkerCore:
    """The slots of one worker, driven by batched commands."""

    def __init__(
        self,
        recipes: dict[int, EnvRecipe],
        seeds: dict[int, int],
        autoreset: AutoresetMode,
        cursor: Any = None,
    ) -> None:
        self.slots = {i: EnvSlot(r, seeds[i], autoreset) for i, r in recipes.items()}
        for slot in self.slots.values():
            slot.track = True
        self.cursor = cursor  # shared [env index or -1, time.monotonic() at call start]
        self.last: list[Any] = []  # the last reply, kept so the parent can ask for it env by env

    def _mark(self, index: int) -> None:
        if self.cursor is not None:
            self.cursor[1] = time.monotonic()
            self.cursor[0] = index

    def _idle(self) -> None:
        if self.cursor is not None:
            self.cursor[0] = -1

    def reset(self, items: Sequence[ResetItem]) -> list[tuple[str, dict[str, Any], SlotMeta]]:
        """Reset each listed slot; returns observation, info and replay record per slot."""
        out = []
        for i, seed, fault in items:
            self._mark(i)
            slot = self.slots[i]
            obs, info = slot.reset(seed, fault)
            out.append((obs, info, slot.meta()))
        self._idle()
        return out

    def step(self, items: Sequence[StepItem]) -> list[tuple[EnvStep, SlotMeta]]:
        """Step each listed slot; returns the step tuple and replay record per slot.

        ``"same_step"`` resets are left to a separate `autoreset` command, so a reset that crashes or hangs this
        worker cannot take the final step's result down with it.
        """
        out = []
        slots = self.slots
        for i, action in items:
            self._mark(i)
            slot = slots[i]
            out.append((slot.step(action, False), slot.meta()))
        self._idle()
        return out

    def autoreset(
        self, items: Sequence[tuple[int, InjectedFault | None]]
    ) -> list[tuple[str, dict[str, Any], SlotMeta]]:
        """Start the next episode of each listed slot (the ``"same_step"`` reset after an episode ended)."""
        out = []
        for i, fault in items:
            self._mark(i)
            slot = self.slots[i]
            obs, info = slot.start_episode(fault)
            out.append((obs, info, slot.meta()))
        self._idle()
        return out

    def discard(self, items: Sequence[int]) -> list[None]:
        """End the listed slots' episodes and drop their envs (their last result never reached the parent)."""
        for i in items:
            self.slots[i].discard()
            self.slots[i].ended = True
        return [None] * len(items)

    def each(self, _: Any) -> list[bytes]:
        """The last reply, pickled env by env (for a parent that could not unpickle it as a whole)."""
        out = []
        for res in self.last:
            try:
                out.append(pickle.dumps(res))
            except Exception:
                out.append(b"")
        return out

    def set_complexity(self, items: Sequence[tuple[int, int]]) -> list[None]:
        """Record pending levels."""
        for i, level in items:
            self.slots[i].set_complexity(level)
        return [None] * len(items)

    def restore(self, items: Sequence[RestoreItem]) -> list[str | None]:
        """Rebuild slots by replay; returns, per slot, None or the error that made replay fail."""
        out: list[str | None] = []
        for i, meta, actions in items:
            self._mark(i)
            try:
                self.slots[i].restore(meta, actions)
                out.append(None)
            except Exception as exc:
                self.slots[i].discard()
                out.append(f"{type(exc).__name__}: {exc}")
        self._idle()
        return out

    def sanitize(self, cmd: str, items: Sequence[Any], results: list[Any]) -> list[Any]:
        """Replace each result that cannot be pickled with that env's failure (its episode ends, as on a raise)."""
        out = []
        for item, res in zip(items, results):
            try:
                pickle.dumps(res)
                out.append(res)
                continue
            except Exception as exc:
                err = exc
            slot = self.slots[item[0]]
            bad = TypeError(f"the env returned an object that cannot be sent to the parent: {err}")
            if cmd == "step":
                out.append((slot.fail_now(bad, False), slot.meta()))
            else:
                obs, info = slot.reset_failed(bad)
                out.append((obs, info, slot.meta()))
        return out

    def close(self) -> None:
        """Close every env."""
        for slot in self.slots.values():
            slot.close()


def worker_main(
    conn: Any, cursor: Any, recipes: dict[int, EnvRecipe], seeds: dict[int, int], autoreset: AutoresetMode
) -> None:
    """Entry point of a process worker: serve ``(command, payload)`` messages until "close" or EOF."""
    os.environ[WORKER_ENV_FLAG] = "1"
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    core = WorkerCore(recipes, seeds, autoreset, cursor)
    while True:
        try:
            cmd, payload = conn.recv()
        except (EOFError, OSError):
            break
        if cmd == "close":
            core.close()
            conn.send(("ok", None))
            break
        try:
            reply: tuple[str, Any] = ("ok", getattr(core, cmd)(payload))
        except Exception:
            conn.send(("err", traceback.format_exc()))
            continue
        if cmd != "each":
            core.last = reply[1]
        try:
            conn.send(reply)
        except Exception:  # an env returned something unpicklable: fail that env, not the whole batch
            try:
                core.last = core.sanitize(cmd, payload, reply[1])
                conn.send(("ok", core.last))
            except Exception:
                conn.send(("err", traceback.format_exc()))
    conn.close()
