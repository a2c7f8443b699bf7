"""What the verl and OpenRLHF advantage-step benchmarks share: one synthetic multi-turn batch, rows and targets.

A batch of ``transitions`` env turns: episodes of `TURNS` turns (a reply of `REPLY` tokens, then an env turn of
`ENV` tokens), `GROUP` samples per prompt (the framework's GRPO groups), spread over `N_ENVS` envs (PERPO's
groups), seeded. The framework's own estimator gets the episode return as the score on the last reply token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common import Target, interleaved, print_table, ratio, write_result

TURNS, REPLY, ENV, GROUP, N_ENVS = 8, 12, 20, 8, 16
ADVANTAGE_LIMIT = 2.0  # target: PERPO's step within 2x the framework's own GRPO estimator
ADVANTAGE_COLUMNS = ("case", "arm", "transitions", "ms", "ratio_vs_native")


@dataclass
class SyntheticBatch:
    """Per-row env ids, turn rewards, turn ends and prompt uids, with the token-level mask and scores."""

    env_ids: list[str]
    uids: list[str]
    turn_rewards: list[list[float]]
    turn_ends: list[list[int]]
    mask: Any  # torch.long [B, T]: 1 on reply tokens
    scores: Any  # torch.float32 [B, T]: episode return on each row's last reply token
    group: int = GROUP


def synthetic_batch(transitions: int, seed: int = 0) -> SyntheticBatch:
    """`transitions` turns in ``transitions // TURNS`` episodes (see the module docstring)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    episodes = max(GROUP, transitions // TURNS // GROUP * GROUP)
    width = TURNS * (REPLY + ENV)
    mask = torch.zeros(episodes, width, dtype=torch.long)
    ends = []
    for t in range(TURNS):
        mask[:, t * (REPLY + ENV) : t * (REPLY + ENV) + REPLY] = 1
        ends.append(t * (REPLY + ENV) + REPLY)
    rewards = rng.choice([0.0, 0.0, -0.1, 0.5, 1.0], size=(episodes, TURNS))
    scores = torch.zeros(episodes, width)
    scores[:, ends[-1] - 1] = torch.tensor(rewards.sum(1), dtype=torch.float32)
    return SyntheticBatch(
        env_ids=[f"bench:Env{(i // GROUP) % N_ENVS}" for i in range(episodes)],
        uids=[f"u{i // GROUP}" for i in range(episodes)],
        turn_rewards=[[float(x) for x in row] for row in rewards],
        turn_ends=[list(ends) for _ in range(episodes)],
        mask=mask,
        scores=scores,
    )


def advantage_rows(framework: str, results: dict[int, dict[str, dict[str, Any]]], native: str) -> list[dict[str, Any]]:
    """Table/JSON rows: per batch size, both arms' median ms and the ratio to the framework's own estimator."""
    rows = []
    for transitions, arms in results.items():
        base = arms[native]["ms"]
        for arm, m in arms.items():
            rows.append(
                {
                    "framework": framework,
                    "case": f"{transitions // 1024}k transitions",
                    "arm": arm,
                    "transitions": transitions,
                    **m,
                    "ratio_vs_native": ratio(m["ms"], base),
                }
            )
    return rows


def advantage_targets(framework: str, rows: Sequence[dict[str, Any]], native: str = "grpo") -> list[Target]:
    """One target per batch size: PERPO's ms within `ADVANTAGE_LIMIT` times the framework's GRPO."""
    out = []
    for r in rows:
        if r["arm"] != native:
            base = next(x for x in rows if x["case"] == r["case"] and x["arm"] == native)
            out.append(
                Target(
                    name=f"{framework} {r['arm']} advantage step vs {native}, {r['case']}",
                    value=round(r["ratio_vs_native"], 4),
                    limit=ADVANTAGE_LIMIT,
                    unit=f"x {native}",
                    met=r["ratio_vs_native"] <= ADVANTAGE_LIMIT,
                    note=f"{r['arm']} {r['ms']:.2f} ms, {native} {base['ms']:.2f} ms",
                )
            )
    return out


def run_advantage_bench(
    framework: str,
    args: Any,
    rounds: int,
    arms_for: Callable[[int], dict[str, Callable[[], dict[str, float]]]],
    *,
    native: str,
    title: str,
    packages: Sequence[str],
) -> None:
    """``arms_for(transitions)`` interleaved at 4k (and 64k unless --quick); prints the table, writes JSON."""
    results = {}
    for transitions in (4096,) if args.quick else (4096, 65536):
        arms = arms_for(transitions)
        for arm in arms.values():  # warm-up
            arm()
        results[transitions] = interleaved(arms, rounds, label=f"{framework} advantage {transitions}")
    rows = advantage_rows(framework, results, native=native)
    print_table(title, rows, ADVANTAGE_COLUMNS)
    write_result(
        f"{framework}_advantage",
        title,
        rows,
        args=args,
        plot_metric="ms",
        plot_label="ms per advantage step (lower is better)",
        lower_is_better=True,
        targets=advantage_targets(framework, rows, native),
        packages=packages,
        extra={"baseline": native},
    )
