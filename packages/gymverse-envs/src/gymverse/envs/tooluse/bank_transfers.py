"""BankTransfers: drive a bank API with rule-checked transfers until every account holds its target balance."""

from __future__ import annotations

from typing import Any

from gymverse.actions import CommandGrammar
from gymverse.core import EnvMetadata, StepResult
from gymverse.envs._command import CommandEnv, boxed
from gymverse.envs.tooluse._words import FIRST_NAMES, sample_unique
from gymverse.text import plural


class BankTransfers(CommandEnv):
    r"""Rebalance accounts to their targets through a bank API whose transfers must obey the bank's rules.

    Targets are shown; balances and the transfer network are hidden. Commands: ``\boxed{accounts}`` (names and
    targets), ``\boxed{get_balance A}``, ``\boxed{links A}`` (accounts A may exchange money with),
    ``\boxed{transfer A B amount}`` and ``\boxed{commit}`` (ends the episode). A transfer changes state only if A and
    B are linked, ``1 <= amount <= cap`` and A's balance covers it; otherwise the API rejects it and says which rule
    failed. Links form a tree, so money often has to be routed through intermediate accounts, which can forward it
    only after receiving it.

    Rewards: 1.0 for committing when every balance equals its target (success); 0.0 and episode end for committing
    any other state; 0.0 per call, rejected calls included; -0.1 for a malformed command (base class).
    Complexity: more accounts (3 -> 12), a smaller per-transfer cap (200 -> 25, so more transfers), less slack.
    """

    #: Pure Python, microseconds per step: pool sessions batch its calls (`gymverse.pool.batched`).
    nonblocking = True

    metadata = EnvMetadata(
        name="BankTransfers",
        family="tool-use",
        domain="tool-use",
        description="Use a rule-checked bank API (balances, links, transfers) to reach target balances.",
        action_format=r"\boxed{accounts}, \boxed{get_balance <A>}, \boxed{links <A>}, "
        r"\boxed{transfer <A> <B> <amount>} or \boxed{commit}",
        max_turns=120,
    )
    complexity_params = {"accounts": (3, 12), "cap": (200, 25), "slack": (6, 1)}
    grammar = CommandGrammar(
        {"accounts": [], "get_balance": [str], "links": [str], "transfer": [str, str, int], "commit": []}
    )

    def _reset(self) -> tuple[str, dict[str, Any]]:
        n, self.cap = int(self.params["accounts"]), int(self.params["cap"])
        self.names = sample_unique(self.rng, FIRST_NAMES, n)
        self.balance = [int(x) for x in self.rng.integers(1, 151, size=n)]
        self.parent = [-1] + [int(self.rng.integers(0, i)) for i in range(1, n)]  # random tree rooted at 0
        self.nbrs: list[list[int]] = [[] for _ in range(n)]
        for child in range(1, n):
            self.nbrs[child].append(self.parent[child])
            self.nbrs[self.parent[child]].append(child)
        total = sum(self.balance)
        weights = self.rng.integers(1, 100, size=n)
        self.target = [int(total * int(w) // int(weights.sum())) for w in weights]
        self.target[0] += total - sum(self.target)
        if self.target == self.balance:  # always leave something to do: move one unit off the richest target
            rich = self.target.index(max(self.target))
            self.target[rich] -= 1
            self.target[(rich + 1) % n] += 1
        self.queried_balance: set[int] = set()
        self.queried_links: set[int] = set()
        needed = sum(-(-abs(f) // self.cap) for f in self._edge_flows().values())
        self.params["max_turns"] = 2 * n + needed + 1 + int(self.params["slack"])
        obs = (
            f"Bank accounts and their target balances: {self._targets()}. Balances and which accounts may transfer "
            f"to each other are hidden. Rules: transfers only between linked accounts, 1 <= amount <= {self.cap}, "
            r"no overdraft. Commands: \boxed{accounts}, \boxed{get_balance A}, \boxed{links A}, "
            r"\boxed{transfer A B amount}, \boxed{commit}. "
            f"Commit once every balance equals its target; you have {plural(self.params['max_turns'], 'turn')}."
        )
        return obs, {"accounts": list(self.names), "cap": self.cap}

    def _targets(self) -> str:
        # alphabetical, because index order would reveal the tree (parents precede children)
        return ", ".join(f"{a}={t}" for a, t in sorted(zip(self.names, self.target)))

    def _edge_flows(self) -> dict[tuple[int, int], int]:
        """Money that must cross each tree edge (child, parent); positive means child -> parent."""
        surplus = [b - t for b, t in zip(self.balance, self.target)]
        flows: dict[tuple[int, int], int] = {}
        for child in range(len(self.names) - 1, 0, -1):  # parents have smaller indices than their children
            flows[(child, self.parent[child])] = surplus[child]
            surplus[self.parent[child]] += surplus[child]
        return flows

    def _account(self, name: str) -> int | str:
        try:
            return self.names.index(name.lower())
        except ValueError:
            return f"Unknown account {name!r}; accounts are {', '.join(self.names)}."

    def _do_accounts(self) -> StepResult:
        return self.feedback(f"Accounts (target balances): {self._targets()}.")

    def _do_get_balance(self, name: str) -> StepResult:
        a = self._account(name)
        if isinstance(a, str):
            return self.feedback(a)
        self.queried_balance.add(a)
        return self.feedback(f"Balance of {self.names[a]}: {self.balance[a]} (target {self.target[a]}).")

    def _do_links(self, name: str) -> StepResult:
        a = self._account(name)
        if isinstance(a, str):
            return self.feedback(a)
        self.queried_links.add(a)
        linked = ", ".join(self.names[b] for b in sorted(self.nbrs[a]))
        return self.feedback(f"{self.names[a]} is linked to: {linked}.")

    def _do_transfer(self, src_name: str, dst_name: str, amount: int) -> StepResult:
        src, dst = self._account(src_name), self._account(dst_name)
        if isinstance(src, str) or isinstance(dst, str):
            return self.feedback(src if isinstance(src, str) else str(dst), rejected=True)
        if dst not in self.nbrs[src]:
            problem = f"{self.names[src]} and {self.names[dst]} are not linked"
        elif not 1 <= amount <= self.cap:
            problem = f"amount must be between 1 and {self.cap}"
        elif self.balance[src] < amount:
            problem = f"{self.names[src]} has insufficient funds"
        else:
            self.balance[src] -= amount
            self.balance[dst] += amount
            return self.feedback(
                f"Transferred {amount} from {self.names[src]} to {self.names[dst]}. New balances: "
                f"{self.names[src]}={self.balance[src]}, {self.names[dst]}={self.balance[dst]}."
            )
        return self.feedback(f"Transfer rejected: {problem}. No money moved.", rejected=True)

    def _do_commit(self) -> StepResult:
        off = [f"{a}={b} (target {t})" for a, b, t in zip(self.names, self.balance, self.target) if b != t]
        if not off:
            return self.finish(True, "Committed: every account holds its target balance.")
        return self.finish(False, "Commit failed; off target: " + ", ".join(off) + ".")

    def solve(self) -> str:
        for a in range(len(self.names)):
            if a not in self.queried_balance:
                return boxed("get_balance", self.names[a])
        for a in range(len(self.names)):
            if a not in self.queried_links:
                return boxed("links", self.names[a])
        # Route along the unique tree flow; an account with nothing left to receive can always afford its sends.
        moves = []
        for (child, par), f in self._edge_flows().items():
            if f:
                moves.append((child, par, f) if f > 0 else (par, child, -f))
        if not moves:
            return boxed("commit")
        receivers = {dst for _, dst, _ in moves}
        src, dst, f = min(m for m in moves if m[0] not in receivers)
        return boxed("transfer", self.names[src], self.names[dst], min(f, self.cap))

    def sample_random_action(self) -> str:
        if not hasattr(self, "names"):
            return boxed("accounts")
        r = self.rng.random()
        a, b = self.pick(self.names), self.pick(self.names)
        if r < 0.1:
            return boxed("accounts")
        if r < 0.3:
            return boxed("get_balance", a)
        if r < 0.45:
            return boxed("links", a)
        if r < 0.95:
            return boxed("transfer", a, b, int(self.rng.integers(1, 2 * self.cap)))
        return boxed("commit")
