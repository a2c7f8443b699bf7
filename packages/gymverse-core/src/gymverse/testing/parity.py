"""The cross-adapter parity batch: one fixed set of episodes every adapter's advantage hook must agree on.

`parity_trajectories()` plays, through the real `gymverse.rollout.run_episode` on in-process sessions, one episode
of each kind the failure policy (`gymverse.failures`) distinguishes: successes, failures, a horizon cut, a length
cut, a crashed step, a reset failure and an aborted generation, over two env ids (so env-level normalization is
not batch normalization). `expected_advantages` is the one PERPO (`gymverse.perpo.advantages`) on them, and
`expected_curriculum` the success flags a curriculum must record. Each adapter's parity test pushes these
trajectories through its own translation and its framework's real advantage hook and compares, token by token.
Token ids are UTF-8 bytes (`ByteTokenizer`), so any framework's data structures can carry them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gymverse.rollout.batch import EpisodeBatch
from gymverse.rollout.episode import Generation, run_episode
from gymverse.rollout.render import PlainRenderer
from gymverse.rollout.session import InProcessSession
from gymverse.testing import vectest as _fixtures  # noqa: F401 - registers the vectest: envs the batch plays
from gymverse.trajectory import Trajectory

RENDERER = PlainRenderer()
Policy = Callable[[str, int], str | None]  # (prompt text, turn) -> reply text, None: the server aborts


def solver(prompt: str, turn: int) -> str | None:
    """Reach the target of a ``vectest:Count`` episode exactly (reads the last 'Reach N' / 'Total T')."""
    target = int(re.findall(r"Reach (\d+)", prompt)[0])
    totals = re.findall(r"Total (\d+)", prompt)
    left = target - (int(totals[-1]) if totals else 0)
    return "\\boxed{" + str(min(3, left)) + "}"


def threes(prompt: str, turn: int) -> str | None:
    """Always add 3 (overshoots most targets)."""
    return "\\boxed{3}"


def chatter(prompt: str, turn: int) -> str | None:
    """Never a well-formed action (the format penalty every turn)."""
    return "I think the answer is probably three"


def aborts_at_second_turn(prompt: str, turn: int) -> str | None:
    """One good move, then the server aborts the request."""
    return None if turn == 1 else "\\boxed{1}"


@dataclass(frozen=True)
class ParityCase:
    """One episode of the parity batch."""

    name: str
    env_id: str
    seed: int
    policy: Policy
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    horizon: int | None = None
    max_response_tokens: int | None = None
    stop_reason: str = ""  # what the episode must end with


CASES = (
    ParityCase("win", "vectest:Count", 1, solver, stop_reason="terminated"),
    ParityCase("overshoot", "vectest:Count", 2, threes, stop_reason="terminated"),
    ParityCase("horizon", "vectest:Count", 3, chatter, horizon=3, stop_reason="horizon"),
    ParityCase("length", "vectest:Count", 4, solver, max_response_tokens=40, stop_reason="length"),
    ParityCase("crashed-step", "vectest:Faulty", 5, solver, {"fail_rate": 1.0}, stop_reason="env_error"),
    ParityCase("reset-failure", "vectest:BadReset", 6, solver, {"how": "raise"}, stop_reason="reset_error"),
    ParityCase("aborted", "vectest:Count", 7, aborts_at_second_turn, stop_reason="generation_aborted"),
    ParityCase("win-b", "vectest:Faulty", 8, solver, {"fail_rate": 0.0}, stop_reason="terminated"),
    ParityCase("overshoot-b", "vectest:Faulty", 9, threes, {"fail_rate": 0.0}, stop_reason="terminated"),
    ParityCase("win-b2", "vectest:Faulty", 10, solver, {"fail_rate": 0.0}, stop_reason="terminated"),
)


def _generate(policy: Policy) -> Callable[[list[int], int | None], Awaitable[Generation]]:
    turn = 0

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        nonlocal turn
        reply = policy(RENDERER.decode(prompt_ids), turn)
        turn += 1
        if reply is None:
            return Generation([], finish_reason="abort")
        ids = list(reply.encode("utf-8"))[: max_tokens if max_tokens is not None else None]
        return Generation(ids, [-0.5] * len(ids), finish_reason="stop")

    return generate


async def _play(case: ParityCase, index: int) -> Trajectory:
    import gymverse.testing.vectest  # noqa: F401  (registers the vectest: envs)

    session = InProcessSession.make(case.env_id, **case.env_kwargs)
    async with session:
        traj = await run_episode(
            session,
            _generate(case.policy),
            renderer=RENDERER,
            horizon=case.horizon,
            seed=case.seed,
            max_response_tokens=case.max_response_tokens,
            episode_id=f"parity-{index}-{case.name}",
        )
    if traj.stop_reason != case.stop_reason:
        raise AssertionError(f"parity case {case.name}: ended with {traj.stop_reason!r}, not {case.stop_reason!r}")
    return traj


def parity_trajectories() -> list[Trajectory]:
    """The parity batch, in `CASES` order (same every call: seeded envs, scripted replies)."""

    async def main() -> list[Trajectory]:
        return [await _play(c, i) for i, c in enumerate(CASES)]

    return asyncio.run(main())


def expected_advantages(trajectories: list[Trajectory], *, gamma: float = 1.0) -> list[np.ndarray]:
    """Per trajectory, the PERPO advantage of every response token (0 on env tokens and in void episodes)."""
    from gymverse.perpo import advantages

    out = advantages(EpisodeBatch.from_trajectories(trajectories), gamma=gamma)
    tokens = np.asarray(out.tokens)
    return [tokens[b, : len(t.tokens.response_ids)] for b, t in enumerate(trajectories) if t.tokens is not None]


def expected_curriculum(trajectories: list[Trajectory]) -> dict[str, list[bool]]:
    """Per env id, the success flags a curriculum records for the batch (void episodes are not recorded)."""
    from gymverse.curriculum import EpisodeOutcome

    out: dict[str, list[bool]] = {}
    for t in trajectories:
        o = EpisodeOutcome.of(t)
        if not o.error:
            out.setdefault(o.env_id, []).append(o.success)
    return out


#: Folder where adapters' parity tests write what their framework computed (unset: nothing is written).
PARITY_OUT = "GYMVERSE_PARITY_OUT"


def report(adapter: str, token_advantages: Sequence[Any], curriculum: Mapping[str, Sequence[bool]]) -> None:
    """Write `adapter`'s per-episode response-token advantages (in `CASES` order) and curriculum records for the
    parity batch (gamma 1) to ``$GYMVERSE_PARITY_OUT/<adapter>.json``; ``.ci/compare_parity.py`` then compares the
    four adapters, run in their own environments, with each other and with core."""
    folder = os.environ.get(PARITY_OUT)
    if not folder:
        return
    data = {
        "adapter": adapter,
        "advantages": [[float(x) for x in np.asarray(a, dtype=np.float64).ravel()] for a in token_advantages],
        "curriculum": {k: sorted(bool(f) for f in v) for k, v in curriculum.items()},
    }
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{adapter}.json"), "w", encoding="utf-8") as fh:
        json.dump(data, fh)
