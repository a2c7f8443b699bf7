"""`ProcessVecEnv`: envs hosted by worker processes, several per worker, over pipes.

Each worker gets one message per vector call with its whole share of the batch, so IPC is amortized over the
envs it hosts. The parent supervises while it waits: a worker that dies (SIGKILL, segfault, OOM) or whose current
env call exceeds ``step_timeout`` is killed and replaced; the env that was running ends its episode truncated
with ``info["error"]``; every other env of that worker is rebuilt in the new worker by replaying its episode from
the parent's ledger, then stepped again, so its transcript is exactly what it would have been.

Start method: ``forkserver`` by default (safe with threads in the parent, and a replacement worker forks from a
warm server that already imported GymVerse); ``spawn`` also works; ``fork`` is faster to start but unsafe once
the parent runs threads.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait as mp_wait
from typing import TYPE_CHECKING, Any

from gymverse.pool.faults import InjectedFault, StepTimeout, VectorError, WorkerCrashed
from gymverse.pool.slot import EnvRecipe, EnvSlot
from gymverse.vector.base import VecOptions, VecStepResult, collect_resets
from gymverse.vector.out_of_process import OutOfProcessVecEnv, Undecodable
from gymverse.vector.worker import worker_main

if TYPE_CHECKING:  # typing.Unpack is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Unpack

_START_METHODS = ("forkserver", "spawn", "fork")
_RESTORE_TIMEOUT = 120.0


@dataclass
class _Worker:
    proc: Any
    conn: Any
    cursor: Any
    indices: list[int]


class ProcessVecEnv(OutOfProcessVecEnv):
    """Envs in `num_workers` processes (default: one per CPU core, at most one per env)."""

    backend = "process"

    def __init__(
        self,
        recipes: Sequence[EnvRecipe],
        *,
        num_workers: int | None = None,
        start_method: str = "forkserver",
        **options: Unpack[VecOptions],
    ) -> None:
        super().__init__(recipes, **options)
        if start_method not in _START_METHODS:
            raise ValueError(f"start_method must be one of {_START_METHODS}, got {start_method!r}")
        self._plan_hosts(num_workers if num_workers is not None else min(self.num_envs, os.cpu_count() or 1))
        self._ctx: Any = mp.get_context(start_method)
        if start_method == "forkserver":
            self._ctx.set_forkserver_preload(["gymverse.vector.worker"])
        self.workers: list[_Worker] = []
        try:
            for block in self.blocks:
                self.workers.append(self._start(block))
        except BaseException:
            self._close()
            raise

    # ------------------------------------------------------------------ workers
    def _start(self, indices: list[int]) -> _Worker:
        parent, child = self._ctx.Pipe(duplex=True)
        cursor = self._ctx.RawArray("d", 2)
        cursor[0] = -1
        recipes, seeds = self._host_args(indices)
        proc = self._ctx.Process(
            target=worker_main, args=(child, cursor, recipes, seeds, self.autoreset), daemon=True, name="gymverse-env"
        )
        proc.start()
        child.close()
        return _Worker(proc, parent, cursor, indices)

    def _kill(self, worker: _Worker) -> None:
        if worker.proc.is_alive():
            worker.proc.kill()
        worker.proc.join(timeout=5)
        worker.conn.close()

    def _replace(self, wid: int, culprits: set[int]) -> dict[int, str]:
        """Kill worker `wid`, start a new one and restore its envs; returns envs whose replay failed."""
        old = self.workers[wid]
        self._kill(old)
        self.restarts += 1
        new = self._start(old.indices)
        self.workers[wid] = new
        new.conn.send(("restore", self._restore_items(old.indices, culprits)))
        if not new.conn.poll(_RESTORE_TIMEOUT):
            self._kill(new)
            raise VectorError(f"a replacement worker did not finish replaying its envs in {_RESTORE_TIMEOUT}s")
        try:
            status, payload = new.conn.recv()
        except (EOFError, OSError) as err:  # e.g. the worker could not even start (unimportable main module)
            self._kill(new)
            raise VectorError(
                f"a replacement worker died while replaying its envs (exit code {new.proc.exitcode})"
            ) from err
        if status != "ok":
            raise VectorError(f"restoring a replaced worker failed:\n{payload}")
        return {i: err for i, err in zip(old.indices, payload) if err is not None}

    def _blame(self, worker: _Worker, timed_out: bool) -> tuple[int | None, InjectedFault]:
        index = int(worker.cursor[0])
        culprit = index if index >= 0 else None
        where = f"env {culprit}" if culprit is not None else "a vector call"
        if timed_out:
            return culprit, InjectedFault(StepTimeout.__name__, f"{where} exceeded step_timeout={self.step_timeout}s")
        code = worker.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return culprit, InjectedFault(WorkerCrashed.__name__, f"worker process died ({how}) while running {where}")

    def _overdue(self, worker: _Worker, now: float) -> bool:
        if self.step_timeout is None or worker.cursor[0] < 0:
            return False
        return now - worker.cursor[1] > self.step_timeout

    def _gather(self, wids: list[int]) -> tuple[dict[int, Any], dict[int, tuple[bool, _Worker]]]:
        """Wait for each worker's reply; returns replies and, for failed workers, (timed_out, worker)."""
        replies: dict[int, Any] = {}
        failed: dict[int, tuple[bool, _Worker]] = {}
        pending = {wid: self.workers[wid] for wid in wids}
        broken: list[str] = []
        poll = self._poll_interval()
        while pending:
            waitables: list[Any] = [w.conn for w in pending.values()] + [w.proc.sentinel for w in pending.values()]
            ready = set(mp_wait(waitables, timeout=poll))
            now = time.monotonic()
            for wid, w in list(pending.items()):
                if w.conn in ready or w.conn.poll():
                    try:
                        status, payload = w.conn.recv()
                    except (EOFError, OSError):
                        w.proc.join(timeout=5)
                        failed[wid] = (False, w)
                        del pending[wid]
                        continue
                    except Exception:  # pickled fine in the worker but does not unpickle here: go env by env
                        status, payload = "ok", self._each(w)
                    if status != "ok":  # raised once every reply is read, so the pipes stay in step
                        broken.append(f"worker {wid} failed outside any env call:\n{payload}")
                    else:
                        replies[wid] = payload
                    del pending[wid]
                elif w.proc.sentinel in ready:
                    w.proc.join(timeout=5)
                    failed[wid] = (False, w)
                    del pending[wid]
                elif self._overdue(w, now):
                    failed[wid] = (True, w)
                    del pending[wid]
        if broken:
            raise VectorError("\n".join(broken))
        return replies, failed

    def _each(self, worker: _Worker) -> list[Any]:
        """The worker's last reply, unpickled env by env; an env whose result cannot be is marked `Undecodable`."""
        worker.conn.send(("each", None))
        status, blobs = worker.conn.recv()
        if status != "ok":
            raise VectorError(f"a worker failed re-sending its results:\n{blobs}")
        out: list[Any] = []
        for blob in blobs:
            try:
                out.append(pickle.loads(blob))
            except Exception as exc:
                out.append(Undecodable(f"{type(exc).__name__}: {exc}"))
        return out

    def _run(self, cmd: str, items: dict[int, Any], fault_item: Any) -> dict[int, Any]:
        """Send `items` ({env index: item}) to their workers, supervise, and recover until every env answered.

        `fault_item(index, item, fault)` builds the item that makes a slot report `fault` instead of running.
        """
        results: dict[int, Any] = {}
        todo = self._quarantine(items, fault_item)
        while todo:
            by_worker: dict[int, list[int]] = {}
            for i in todo:
                by_worker.setdefault(self._owner[i], []).append(i)
            for wid, idx in by_worker.items():
                if not self.workers[wid].proc.is_alive():
                    # Died between calls (killed from outside): no env was running, so none is blamed.
                    for i, why in self._replace(wid, set()).items():
                        if i in todo:
                            todo[i] = fault_item(i, todo[i], InjectedFault("ReplayFailed", why))
                with contextlib.suppress(OSError):  # a worker dying right now is caught by `_gather`
                    self.workers[wid].conn.send((cmd, [todo[i] for i in idx]))
            replies, failed = self._gather(list(by_worker))
            for wid, payload in replies.items():
                for i, res in zip(by_worker[wid], payload):
                    results[i] = res
                    del todo[i]
            for wid, (timed_out, worker) in failed.items():
                culprit, fault = self._blame(worker, timed_out)
                batch = by_worker[wid]
                # A dead worker with no env call in flight gives no culprit: blame its whole batch, never loop.
                blamed = {culprit} if culprit in batch else set(batch)
                replay_failed = self._replace(wid, blamed)
                for i in batch:
                    if i in blamed:
                        todo[i] = fault_item(i, todo[i], fault)
                    elif i in replay_failed:
                        todo[i] = fault_item(i, todo[i], InjectedFault("ReplayFailed", replay_failed[i]))
        return results

    # ------------------------------------------------------------------ hooks
    def _reset(self, indices: list[int], seeds: list[int | None]) -> tuple[list[str], list[dict[str, Any]]]:
        self._forgive(indices)
        items = {i: (i, s, None) for i, s in zip(indices, seeds)}
        results = self._run("reset", items, lambda i, item, fault: (i, item[1], fault))
        return collect_resets(self._after_reset(i, results[i]) for i in indices)

    def _step(self, indices: list[int], actions: list[Any]) -> VecStepResult:
        items = {i: (i, a) for i, a in zip(indices, actions)}
        results = self._run("step", items, lambda i, item, fault: (i, fault))
        steps: dict[int, Any] = {}
        lost: list[int] = []
        for i, a in zip(indices, actions):
            if isinstance(results[i], Undecodable):
                lost.append(i)
            steps[i] = self._book_step(i, a, results[i])
        if lost:
            self._discard(lost)
        # "same_step": the reset runs as its own supervised call, so a crash or hang there keeps the final step
        due = self._owing_reset(indices, steps, skip=lost)
        if due:
            resets = self._run("autoreset", {i: (i, None) for i in due}, lambda i, item, fault: (i, fault))
            for i in due:
                steps[i] = EnvSlot.merge_final(self._after_reset(i, resets[i]), steps[i])
        return VecStepResult.collect(indices, [steps[i] for i in indices])

    def _after_reset(self, i: int, res: Any) -> tuple[str, dict[str, Any]]:
        if isinstance(res, Undecodable):
            self._discard([i])
        return self._book_reset(i, res)

    def _discard(self, indices: list[int]) -> None:
        self._run("discard", {i: i for i in indices}, lambda i, item, fault: item)

    def _set_complexity(self, level: int, indices: list[int]) -> None:
        items = {i: (i, level) for i in indices}
        self._run("set_complexity", items, lambda i, item, fault: item)
        self._record_levels(level, indices)

    def _close(self) -> None:
        for w in self.workers:
            try:
                if w.proc.is_alive():
                    w.conn.send(("close", None))
                    if w.conn.poll(2):
                        w.conn.recv()
            except (OSError, EOFError):
                pass
            w.proc.join(timeout=2)
            self._kill(w)
        self.workers = []
