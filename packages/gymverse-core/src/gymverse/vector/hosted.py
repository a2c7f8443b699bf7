"""`HostedVecEnv`: what the process and Ray backends share, whose envs live in replaceable hosts elsewhere.

A host (worker process or Ray actor) owns a contiguous block of envs. The parent keeps a `ReplayLedger` of each
env's episode, so a host that dies or hangs can be replaced and its other envs rebuilt exactly by replay.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gymverse.vector.base import VecEnv
from gymverse.vector.faults import ReplayLedger
from gymverse.vector.slot import EnvRecipe, EnvSlot, EnvStep
from gymverse.vector.worker import RestoreItem


def split_blocks(n: int, hosts: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of env indices, one per host."""
    base, extra = divmod(n, hosts)
    out, start = [], 0
    for w in range(hosts):
        size = base + (1 if w < extra else 0)
        out.append(list(range(start, start + size)))
        start += size
    return out


class HostedVecEnv(VecEnv):
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
