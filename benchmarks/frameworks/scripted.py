"""What the oat and RL2 rollout benchmarks share: the envs, the fixed replies of the zero-cost generator, sizes.

The scripted generator returns the same reply tokens every turn, instantly, in the engine's own response type;
each env gets a reply that is a valid action (so every episode runs its env's full 10-turn budget and the env
does real work each turn). The reply carries a Qwen3-style thinking block, which GymVerse strips before the env
sees the action and RL2's/oat's text path passes on as is (the envs parse the ``\\boxed{}`` either way).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from common import Target, print_table, ratio, write_result

#: env id -> the fixed reply text (without the end-of-turn token, which the generator appends)
REPLIES: dict[str, str] = {
    "game:GuessTheNumber": "<think>\nStart low.\n</think>\n\\boxed{1}",
    "game:Mastermind": "<think>\nThree pegs.\n</think>\n\\boxed{1 2 3}",
    "tool-use:UnitConversion": "<think>\nList the units first.\n</think>\n\\boxed{units}",
}
QUICK_ENVS = ("game:GuessTheNumber", "tool-use:UnitConversion")
CONCURRENCY = (1, 8, 64)
QUICK_CONCURRENCY = (1, 8)
TURN_TARGET = 1.0  # issue 34: GymVerse ms/turn at most the framework's native path's (64 concurrent episodes)
ADV_TARGET = 2.0  # PERPO advantage step within 2x the framework's own estimator


class Clock:
    """Wall-clock and process CPU time since construction (CPU time: this process's threads, so a shared,
    overloaded machine's waiting does not count; the envs' worker threads do)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def ms(self, per: float = 1.0) -> tuple[float, float]:
        """(wall ms, CPU ms) elapsed, divided by `per`."""
        return 1000 * (time.perf_counter() - self.wall) / per, 1000 * (time.process_time() - self.cpu) / per


def episodes_per_sample(quick: bool) -> int:
    """Episodes one timed sample plays (smaller batches are repeated up to it): 64, or 16 with --quick."""
    return 16 if quick else 64


def envs_of(quick: bool) -> Sequence[str]:
    """The envs a run covers."""
    return QUICK_ENVS if quick else tuple(REPLIES)


def concurrency_of(quick: bool) -> Sequence[int]:
    """The concurrent-episode counts a run covers (the target is stated at the largest)."""
    return QUICK_CONCURRENCY if quick else CONCURRENCY


def reply_ids(tokenizer: object, env_id: str) -> list[int]:
    """The generator's fixed reply for `env_id`: the text's ids plus the tokenizer's eos (end of turn)."""
    ids = [int(i) for i in tokenizer.encode(REPLIES[env_id], add_special_tokens=False)]  # type: ignore[attr-defined]
    return [*ids, int(tokenizer.eos_token_id)]  # type: ignore[attr-defined]


def case_rows(
    framework: str, case: str, res: Mapping[str, Mapping[str, Any]], metric: str, native: str, **fields: Any
) -> list[dict[str, Any]]:
    """One result row per arm of a case: ``ratio_vs_native`` of its CPU-time `metric` (``cpu_<metric>``) and
    ``wall_ratio_vs_native`` of its wall-clock `metric`, each relative to the `native` arm's."""
    cpu, wall = res[native][f"cpu_{metric}"], res[native][metric]
    return [
        {
            "framework": framework,
            "case": case,
            "arm": arm,
            **fields,
            **r,
            "ratio_vs_native": ratio(r[f"cpu_{metric}"], cpu),
            "wall_ratio_vs_native": ratio(r[metric], wall),
        }
        for arm, r in res.items()
    ]


def turn_targets(framework: str, rows: Sequence[Mapping[str, Any]], native: str, peer: str) -> list[Target]:
    """The per-turn overhead target at the largest concurrency, one per env (`native` arm named `peer` in notes)."""
    top = max(r["concurrency"] for r in rows)
    base = {r["case"]: r["cpu_ms_per_turn"] for r in rows if r["arm"] == native}
    return [
        Target(
            f"{framework} rollout per-turn {r['env']} x{top}",
            r["ratio_vs_native"],
            TURN_TARGET,
            "x native CPU ms/turn",
            r["ratio_vs_native"] <= TURN_TARGET,
            f"CPU time: gymverse {r['cpu_ms_per_turn']:.3f} ms/turn vs {peer} {base[r['case']]:.3f} ms/turn "
            f"(wall-clock ratio {r['wall_ratio_vs_native']:.2f})",
        )
        for r in rows
        if r["arm"] == "gymverse" and r["concurrency"] == top
    ]


def adv_targets(framework: str, rows: Sequence[Mapping[str, Any]], unit: str, note: str) -> list[Target]:
    """The advantage-step target for each batch size (the ``gymverse_perpo_hook`` arm against the native one)."""
    return [
        Target(
            f"{framework} {r['case']}", r["ratio_vs_native"], ADV_TARGET, unit, r["ratio_vs_native"] <= ADV_TARGET, note
        )
        for r in rows
        if r["arm"] == "gymverse_perpo_hook"
    ]


def gpu_model(tokenizer: Any) -> Any:
    """``--gpu``: a randomly initialised Qwen2-0.5B-shaped causal LM (bf16, CUDA) for real generation cost."""
    import torch
    from gymverse.testing import random_causal_lm

    qwen2_05b = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14)
    model = random_causal_lm(tokenizer, arch="qwen2", **qwen2_05b, num_key_value_heads=2)
    return model.to("cuda", torch.bfloat16).eval()


ROLLOUT_COLUMNS = (
    "case",
    "arm",
    "episodes_per_s",
    "ms_per_turn",
    "cpu_ms_per_turn",
    "ratio_vs_native",
    "wall_ratio_vs_native",
)


def report(
    name: str,
    label: str,
    sections: Mapping[str, Sequence[dict[str, Any]]],
    adv_columns: Sequence[str],
    targets: Sequence[Target],
    *,
    args: Any,
    packages: Sequence[str],
) -> None:
    """Print the rollout (``rollout``, ``gpu``) and ``advantages`` tables and the targets, then write the JSON."""
    titles = {"rollout": "rollout: zero-cost engine", "gpu": "rollout: transformers generation on the GPU"}
    for key, title in titles.items():
        if sections.get(key):
            print_table(f"{label} {title} (medians)", sections[key], ROLLOUT_COLUMNS)
    print_table(f"{label} advantage step (medians, ms)", sections["advantages"], adv_columns)
    for t in targets:
        print(f"target {t.name}: {t.value:.3f} (limit {t.limit}) {'met' if t.met else 'MISSED'} - {t.note}")
    write_result(
        name,
        f"{label}: GymVerse rollout and PERPO vs {label}'s own path",
        [row for rows in sections.values() for row in rows],
        args=args,
        plot_metric="ratio_vs_native",
        plot_label=f"CPU time relative to {label}'s own path (1 = same)",
        lower_is_better=True,
        targets=targets,
        packages=packages,
        extra={
            "gpu": "measured" if sections.get("gpu") else "skipped: no CUDA device" if args.gpu else "not requested"
        },
    )
