"""`OutOfProcessVecEnv`: the base of the process and Ray backends, whose envs live in replaceable hosts elsewhere.

(Not `gymverse.sandbox.hosted`: that module runs one untrusted env in a sandboxed host process behind a proxy.)

A host (worker process or Ray actor) owns a contiguous block of envs. The parent keeps a `ReplayLedger` of each
env's episode, so a host that dies or hangs can be replaced and its other envs rebuilt exactly by replay. The
book-keeping of each env's results (ledger, quarantine of envs whose resets keep killing their host, results that
reached the parent but cannot be decoded there) lives here, so every out-of-process backend contains the same faults.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from gymverse.pool.faults import (
    InjectedFault,
    StepTimeout,
    WorkerCrashed,
    error_info,
    error_observation,
)
from gymverse.pool.slot import EnvRecipe, EnvSlot, EnvStep, SlotMeta
from gymverse.vector.base import VecEnv
from gymverse.vector.worker import RestoreItem

#: Consecutive resets that killed or hung their host after which an env is quarantined: it is never built or
#: reset again (every step reports ``error_type == "Quarantined"``) until an explicit `reset` gives it another
#: chance. A reset that merely raises costs nothing and is retried at every step, as on every backend.
MAX_RESET_FAILURES = 3
_COSTLY = (WorkerCrashed.__name__, StepTimeout.__name__)


class Undecodable:
    """Stands in for one env's result that reached the parent but could not be decoded there."""

    def __init__(self, why: str) -> None:
        self.why = why


def split_blocks(n: int, hosts: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of env indices, one per host."""
    base, extra = divmod(n, hosts)
    out, start = [], 0
    for w in range(hosts):
        size = base + (1 if w < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


class ReplayLedger:
    """Parent-side record of each env's current episode (seed, level, actions), enough to rebuild it by replay.

    Keeps references to the actions already sent (no copies); cleared at every episode boundary.
    """

    def __init__(self, seeds: list[int]) -> None:
        self.meta = [SlotMeta(s, -1, None, None, False, True) for s in seeds]
        self.actions: list[list[Any]] = [[] for _ in seeds]

    def after_step(self, index: int, action: Any, meta: Any) -> None:
        """Record a step result's replay record; the action joins the log only if the episode continued."""
        old = self.meta[index]
        if meta.episode == old.episode and meta.replayable and old.replayable:
            self.actions[index].append(action)
        else:
            self.actions[index] = []
        self.meta[index] = meta if meta.start is not None else meta._replace(start=old.start)

    def after_reset(self, index: int, meta: Any) -> None:
        """Record an explicit reset."""
        self.meta[index] = meta if meta.start is not None else meta._replace(start=self.meta[index].start)
        self.actions[index] = []

    def set_pending(self, index: int, level: int) -> None:
        """Record a pending complexity level."""
        self.meta[index] = self.meta[index]._replace(pending=level)

    def record(self, index: int) -> tuple[Any, list[Any]]:
        """(meta, actions) to restore env `index` as it is now."""
        return self.meta[index], self.actions[index]

    def culprit_record(self, index: int) -> tuple[Any, list[Any]]:
        """A record that restores env `index` as a live slot without an env, ready to receive an injected fault."""
        # An env whose episode had ended was resetting when it failed: it stays ended, so the injected fault fails
        # that reset instead of failing a step and then running the reset that just crashed once more.
        return self.meta[index]._replace(replayable=False), []

    def ended(self, index: int) -> bool:
        """Whether env `index` needs a reset."""
        return bool(self.meta[index].ended)


class OutOfProcessVecEnv(VecEnv):
    """A backend whose envs live in `len(self.blocks)` hosts; subclasses start, call and replace the hosts."""

    def _plan_hosts(self, hosts: int) -> None:
        """Check the host count and assign each env to a host; starts the ledger and restart counter."""
        if not 1 <= hosts <= self.num_envs:
            raise ValueError(f"num_workers must be in 1..{self.num_envs}, got {hosts}")
        self.ledger = ReplayLedger(self.seeds)
        self.blocks = split_blocks(self.num_envs, hosts)
        self._owner = [w for w, block in enumerate(self.blocks) for _ in block]
        #: Hosts replaced after a crash or a hang.
        self.restarts = 0
        self._reset_failures = [0] * self.num_envs
        #: Quarantined envs and why.
        self.quarantined: dict[int, str] = {}

    def _host_args(self, block: Sequence[int]) -> tuple[dict[int, EnvRecipe], dict[int, int]]:
        """A new host's recipes and base seeds for the envs of `block`."""
        return {i: self.recipes[i] for i in block}, {i: self.seeds[i] for i in block}

    def _restore_items(self, block: Sequence[int], culprits: Collection[int]) -> list[RestoreItem]:
        """What a replacement host replays: each env as the ledger has it, a culprit without its env (to be faulted)."""
        return [(i, *(self.ledger.culprit_record(i) if i in culprits else self.ledger.record(i))) for i in block]

    def _poll_interval(self) -> float | None:
        """How often a supervisor waiting on its hosts checks for an overdue call (None: no step_timeout)."""
        return None if self.step_timeout is None else min(0.05, self.step_timeout / 4)

    def _owing_reset(self, indices: Sequence[int], steps: dict[int, EnvStep], skip: Collection[int] = ()) -> list[int]:
        """Envs whose step ended an episode and whose ``"same_step"`` reset is still to run as a call of its own."""
        if self.autoreset != "same_step":
            return []
        return [i for i in indices if i not in skip and EnvSlot.owes_reset(steps[i])]

    def _record_levels(self, level: int, indices: Sequence[int]) -> None:
        """Note a pending level in the ledger, so a replayed env gets it too."""
        for i in indices:
            self.ledger.set_pending(i, level)

    def _is_ended(self, index: int) -> bool:
        return self.ledger.ended(index)

    # ------------------------------------------------------------ per-env result book-keeping
    def _discard(self, indices: list[int]) -> None:
        """End the listed envs' episodes in their hosts and drop their envs (their last result was lost)."""
        raise NotImplementedError

    def _quarantine(
        self, items: dict[int, Any], fault_item: Callable[[int, Any, InjectedFault], Any]
    ) -> dict[int, Any]:
        """`items` with each quarantined env's item replaced by one that reports ``Quarantined`` without running."""
        return {
            i: fault_item(i, item, InjectedFault("Quarantined", self.quarantined[i])) if i in self.quarantined else item
            for i, item in items.items()
        }

    def _forgive(self, indices: Sequence[int]) -> None:
        """An explicit reset gives a quarantined env another chance."""
        for i in indices:
            self.quarantined.pop(i, None)
            self._reset_failures[i] = 0

    def _book_reset(self, i: int, res: Any) -> tuple[str, dict[str, Any]]:
        """Book-keep env `i`'s reset result (explicit or ``"same_step"``): ledger and quarantine count."""
        if isinstance(res, Undecodable):
            err = error_info(TypeError(f"the env's reset result cannot be unpickled here: {res.why}"), during="reset")
            obs, info = error_observation(err), {**err, "reset_failed": True}
            meta = self.ledger.meta[i]._replace(ended=True, replayable=False, start=None)
        else:
            obs, info, meta = res
        self.ledger.after_reset(i, meta)
        self._count_reset(i, info)
        return obs, info

    def _book_step(self, i: int, action: Any, res: Any) -> EnvStep:
        """Book-keep env `i`'s step result; an undecodable one ends its episode truncated with the error."""
        if isinstance(res, Undecodable):
            info = error_info(TypeError(f"the env's step result cannot be unpickled here: {res.why}"), during="step")
            self.ledger.after_reset(i, self.ledger.meta[i]._replace(ended=True, replayable=False))
            return error_observation(info), 0.0, False, True, info
        step, meta = res
        self.ledger.after_step(i, action, meta)
        if step[4].get("autoreset"):
            self._count_reset(i, step[4])
        return step

    def _count_reset(self, i: int, info: dict[str, Any]) -> None:
        if not info.get("reset_failed"):
            self._reset_failures[i] = 0
            return
        if info.get("error_type") not in _COSTLY:
            return
        self._reset_failures[i] += 1
        if self._reset_failures[i] >= MAX_RESET_FAILURES and i not in self.quarantined:
            self.quarantined[i] = f"env {i} failed {self._reset_failures[i]} resets in a row: {info.get('error')}"
