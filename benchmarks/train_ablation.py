"""PERPO vs GRPO vs ReBN, evolution on/off, on a 3-env mix: `gymverse train` runs, one table, one plot.

Each run is a real ``gymverse train`` subprocess (the CLI users run) with the same model, envs, budget and seed
across arms. Runs go one at a time (seed-major: every arm of seed 0, then of seed 1, ...), and the table, JSON and
plot are rewritten after each, so a run cut short keeps what finished; a rerun skips runs that already have
``--steps`` steps (``--fresh`` starts over; ``--report-only`` re-summarizes what is in ``--out``). Per arm (mean over
seeds, ``±`` half the spread between seeds) the table reports success and mean return per env over the first and
last quarter of steps, final levels, level changes, tokens/s, seconds and CPU-seconds per step, and peak RSS.
Writes ``benchmarks/results/train_ablation.json`` and ``train_ablation.png`` (success and level per env over
steps, one line per arm).

The default mix — ``demo:EchoTarget`` (binary, easy), ``demo:TagEcho`` (an ``<answer>`` tag format, scored 0-7
points), ``demo:ReverseWords`` (binary, hard) — is what SmolLM2-135M can learn something on within a CPU budget
(it solves none of the built-in puzzles). CPU-sized (what the README quotes; ~26 CPU-s per step, so 4 arms × 12
steps ≈ 21 CPU-minutes per seed)::

    nice -n 5 uv run python benchmarks/train_ablation.py --seeds 0,1 --steps 12

GPU-sized (same script)::

    uv run python benchmarks/train_ablation.py --device cuda --threads 0 --steps 200 --prompts 8 --group-size 8 \
        --seeds 0,1,2 --envs demo:EchoTarget,game:GuessTheNumber,game:Mastermind --max-turns 8
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).parent / "results"
ENVS = "demo:EchoTarget,demo:TagEcho,demo:ReverseWords"
ARMS = {
    "perpo+evolve": ["--algo", "perpo", "--evolve"],
    "grpo+evolve": ["--algo", "grpo", "--evolve"],
    "rebn+evolve": ["--algo", "rebn", "--evolve"],
    "perpo-fixed": ["--algo", "perpo"],
}


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def run_arm(arm: str, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One `gymverse train` run (or the finished one already in ``out``); returns its metrics records."""
    run_dir = out / arm / f"seed{seed}"
    metrics_path = run_dir / "metrics.jsonl"
    done = _read_metrics(metrics_path)
    if len(done) >= args.steps and not args.fresh:
        print(f"{arm} seed {seed}: {len(done)} steps already in {run_dir}, kept", flush=True)
        return {"arm": arm, "seed": seed, "rc": 0, "wall_s": None, "metrics": done[: args.steps]}
    for f in (metrics_path, run_dir / "trajectories.jsonl"):  # a partial or --fresh run starts over
        f.unlink(missing_ok=True)
    cmd = [sys.executable, "-c", "from gymverse.cli import main; raise SystemExit(main())", "train"]
    cmd += ["--model", args.model, "--envs", args.envs, "--steps", str(args.steps), "--seed", str(seed)]
    cmd += ["--prompts", str(args.prompts), "--group-size", str(args.group_size), "--patience", str(args.patience)]
    cmd += ["--max-new-tokens", str(args.max_new_tokens), "--temperature", str(args.temperature), "--lr", str(args.lr)]
    cmd += [
        "--micro-batch",
        str(args.micro_batch),
        "--device",
        args.device,
        "--save-every",
        "0",
        "--no-progress",
        "--out",
        str(run_dir),
        *ARMS[arm],
    ]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.max_turns:
        cmd += ["--max-turns", str(args.max_turns)]
    if args.time_limit:
        cmd += ["--time-limit", str(args.time_limit)]
    print(f"{arm} seed {seed}: training {args.steps} steps ...", flush=True)
    started = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    with (out / arm / f"seed{seed}.log").open("w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.perf_counter() - started
    if not args.keep_checkpoints:  # 1.6 GB each for SmolLM2-135M (weights + AdamW state)
        shutil.rmtree(run_dir / "checkpoint", ignore_errors=True)
    metrics = _read_metrics(metrics_path)
    print(f"{arm} seed {seed}: rc {rc}, {len(metrics)} steps, {wall:.0f}s", flush=True)
    return {"arm": arm, "seed": seed, "rc": rc, "wall_s": wall, "metrics": metrics}


def _spread(values: list[float]) -> str:
    """Mean, and ± half the range when there are several seeds."""
    mean = statistics.mean(values)
    return f"{mean:.2f}" if len(values) == 1 else f"{mean:.2f}±{(max(values) - min(values)) / 2:.2f}"


def summarize(arm: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Table row of one arm over its seeds."""
    runs = [r for r in runs if r["metrics"]]
    if not runs:
        return {"arm": arm, "seeds": 0}
    envs = list(runs[0]["metrics"][0]["success_by_env"])

    def window(m: list[dict[str, Any]], env: str, last: bool, key: str = "success_by_env") -> float:
        q = max(1, len(m) // 4)
        part = m[-q:] if last else m[:q]
        return statistics.mean(x[key][env] for x in part)

    cpu = [b["cpu_s"] - a["cpu_s"] for r in runs for a, b in itertools.pairwise(r["metrics"])]
    return {
        "arm": arm,
        "seeds": len(runs),
        "steps": [len(r["metrics"]) for r in runs],
        "success_first": {e: [window(r["metrics"], e, False) for r in runs] for e in envs},
        "success_last": {e: [window(r["metrics"], e, True) for r in runs] for e in envs},
        "return_first": {e: [window(r["metrics"], e, False, "return_by_env") for r in runs] for e in envs},
        "return_last": {e: [window(r["metrics"], e, True, "return_by_env") for r in runs] for e in envs},
        # level after the last step; without evolution the curriculum reports none, so the one in effect
        "levels": {
            e: [r["metrics"][-1]["levels"].get(e, int(r["metrics"][-1]["complexity_by_env"][e])) for r in runs]
            for e in envs
        },
        "level_changes": [sum(len(x["level_changes"]) for x in r["metrics"]) for r in runs],
        "tokens_per_s": statistics.median(x["tokens_per_s"] for r in runs for x in r["metrics"]),
        "step_s": statistics.median(x["step_s"] for r in runs for x in r["metrics"]),
        "cpu_s_per_step": statistics.median(cpu) if cpu else None,
        "peak_rss_mb": max(x["peak_rss_mb"] for r in runs for x in r["metrics"]),
    }


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The ablation table (success and mean return per env: first quarter of steps → last quarter)."""
    envs = args.envs.split(",")
    table = Table(title=f"gymverse train ablation: {args.model} on {args.envs}, {args.steps} steps, seeds {args.seeds}")
    table.add_column("arm")
    table.add_column("seeds\n(steps)")
    for e in envs:
        table.add_column(f"{e.split(':')[-1]}\nsuccess / return\nfirst¼ → last¼")
    for col in ("final levels", "level changes", "tok/s", "s/step", "CPU-s/step", "peak RSS MB"):
        table.add_column(col)
    for r in rows:
        if not r["seeds"]:
            table.add_row(r["arm"], "0", *[""] * (len(envs) + 6))
            continue
        cells = [
            f"{_spread(r['success_first'][e])} → {_spread(r['success_last'][e])}\n"
            f"{_spread(r['return_first'][e])} → {_spread(r['return_last'][e])}"
            for e in envs
        ]
        levels = " ".join("/".join(str(v) for v in r["levels"][e]) for e in envs)
        cpu = f"{r['cpu_s_per_step']:.0f}" if r["cpu_s_per_step"] is not None else "-"
        table.add_row(
            r["arm"],
            f"{r['seeds']}\n({'/'.join(map(str, r['steps']))})",
            *cells,
            levels,
            "/".join(map(str, r["level_changes"])),
            f"{r['tokens_per_s']:.0f}",
            f"{r['step_s']:.0f}",
            cpu,
            f"{r['peak_rss_mb']:.0f}",
        )
    Console(width=200).print(table)
    print("levels and level changes: one value per seed (env order as in the columns); ± = half the seed spread")


def plot(runs: list[dict[str, Any]], envs: list[str], path: Path) -> None:
    """Per env: success, mean return and level over steps; one line per arm (mean over seeds, band = range)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, len(envs), figsize=(4.2 * len(envs), 8.5), squeeze=False, sharex=True)
    arms = list(dict.fromkeys(r["arm"] for r in runs))
    for arm, color in zip(arms, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        mine = [r["metrics"] for r in runs if r["arm"] == arm and r["metrics"]]
        if not mine:
            continue
        n = min(len(m) for m in mine)
        steps = list(range(1, n + 1))
        for col, env in enumerate(envs):
            for row, key in enumerate(("success_by_env", "return_by_env", "complexity_by_env")):
                ys = [[m[i][key][env] for m in mine] for i in range(n)]
                ax = axes[row][col]
                ax.plot(steps, [statistics.mean(y) for y in ys], color=color, marker=".", label=arm)
                if len(mine) > 1:
                    ax.fill_between(steps, [min(y) for y in ys], [max(y) for y in ys], color=color, alpha=0.15)
    for col, env in enumerate(envs):
        axes[0][col].set(title=env, ylim=(-0.02, 1.02), ylabel="success rate" if col == 0 else None)
        axes[1][col].set(ylabel="mean return" if col == 0 else None)
        axes[2][col].set(xlabel="step", ylabel="level in effect" if col == 0 else None)
        axes[2][col].yaxis.set_major_locator(plt.MaxNLocator(integer=True))
        axes[2][col].set_ylim(0.5, max(4.5, axes[2][col].get_ylim()[1]))
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"gymverse train ablation (mean over {len({r['seed'] for r in runs})} seed(s), band = range)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Table, JSON and plot of the runs so far."""
    rows = [summarize(a, [r for r in runs if r["arm"] == a]) for a in dict.fromkeys(r["arm"] for r in runs)]
    print_table(rows, args)
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg": os.getloadavg(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "train_ablation.json").write_text(
        json.dumps({"args": vars(args), "machine": machine, "rows": rows, "runs": runs}, indent=1)
    )
    try:
        plot(runs, args.envs.split(","), RESULTS / "train_ablation.png")
    except ImportError:
        print("matplotlib missing: no plot")
    print(f"wrote {RESULTS / 'train_ablation.json'} and {RESULTS / 'train_ablation.png'}", flush=True)


def main() -> int:
    """Run the arms one at a time, reporting after each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--envs", default=ENVS)
    p.add_argument("--arms", default=",".join(ARMS), help=f"subset of {','.join(ARMS)}")
    p.add_argument("--seeds", default="0", help="comma-separated; each arm runs once per seed")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=0, help="turn cap (0: the envs' own)")
    p.add_argument("--max-new-tokens", type=int, default=20)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per forward/backward (memory)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    p.add_argument("--time-limit", type=float, default=0.0, help="minutes per run (0: none)")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep each run's checkpoint/")
    p.add_argument("--fresh", action="store_true", help="retrain runs that already finished")
    p.add_argument("--report-only", action="store_true", help="summarize the runs already in --out, train nothing")
    p.add_argument("--out", default=str(RESULTS / "train_ablation"))
    args = p.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        p.error(f"unknown arm(s) {unknown}; known: {', '.join(ARMS)}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    out = Path(args.out)
    runs: list[dict[str, Any]] = []
    for seed, arm in itertools.product(seeds, arms):
        if args.report_only:
            metrics = _read_metrics(out / arm / f"seed{seed}" / "metrics.jsonl")[: args.steps]
            if metrics:
                runs.append({"arm": arm, "seed": seed, "rc": 0, "wall_s": None, "metrics": metrics})
            continue
        runs.append(run_arm(arm, seed, args, out))
        report(runs, args)
    if args.report_only:
        report(runs, args)
    return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
