"""The `gymverse train` demo over seeds: SmolLM2-135M learns ``demo:EchoTarget`` on CPU; one table, one plot.

Runs one ``gymverse train`` per seed, one at a time (memory), or summarizes finished run directories (``--runs``);
prints success per step for every seed (level changes marked ``*``) with the mean and spread over seeds, and
writes ``benchmarks/results/train_demo.json`` and ``train_demo.png`` (mean ± seed range, level changes marked).
The default is the configuration the README quotes::

    uv run python benchmarks/train_demo.py --seeds 0,1,2 --time-limit 20
    uv run python benchmarks/train_demo.py --runs runs/demo/seed0 runs/demo/seed1     # summarize only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).parent / "results"
DEMO = ["--model", "smollm2", "--envs", "demo:EchoTarget", "--evolve", "--patience", "2", "--prompts", "4"]
DEMO += ["--group-size", "4", "--max-new-tokens", "16", "--temperature", "0.7", "--lr", "2e-5", "--threads", "1"]


def train(seed: int, args: argparse.Namespace) -> Path:
    """One seed's run (the real CLI); returns its directory."""
    out = Path(args.out) / f"seed{seed}"
    cmd = [sys.executable, "-c", "from gymverse.cli import main; raise SystemExit(main())", "train", *DEMO]
    cmd += ["--seed", str(seed), "--steps", str(args.steps), "--out", str(out), "--no-progress"]
    if args.time_limit:
        cmd += ["--time-limit", str(args.time_limit)]
    if (out / "checkpoint").exists():
        cmd += ["--resume"]
    with (Path(args.out) / f"seed{seed}.log").open("a") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False)
    return out


def main() -> int:
    """Run or summarize the seeds; print the table; write JSON and the plot."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--time-limit", type=float, default=20.0, help="minutes per run")
    p.add_argument("--out", default=str(RESULTS / "train_demo"))
    p.add_argument("--last-step", type=int, default=0, help="table/plot up to this step (0: steps all runs have)")
    p.add_argument("--runs", nargs="*", help="summarize these finished run directories instead of training")
    args = p.parse_args()
    if args.runs:
        dirs = [Path(r) for r in args.runs]
    else:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        seeds = [int(s) for s in args.seeds.split(",")]
        dirs = [train(s, args) for s in seeds]  # one at a time: each run peaks near 4 GB
    runs = {d.name: [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()] for d in dirs}
    steps = args.last_step or min(len(m) for m in runs.values())  # default: the steps every seed has
    runs = {name: m[:steps] for name, m in runs.items()}
    curve = [[m[i]["success"] for m in runs.values() if i < len(m)] for i in range(steps)]
    table = Table(title="demo:EchoTarget success per step, level in effect (* = level change after the step)")
    table.add_column("step")
    for name in runs:
        table.add_column(name)
    table.add_column("mean ± half-range")
    for i in range(steps):
        row = [str(i + 1)]
        for m in runs.values():
            if i < len(m):
                mark = "*" if m[i]["level_changes"] else ""
                row.append(f"{m[i]['success']:.2f} L{int(m[i]['complexity_by_env']['demo:EchoTarget'])}{mark}")
            else:
                row.append("")
        row.append(f"{statistics.mean(curve[i]):.2f} ± {(max(curve[i]) - min(curve[i])) / 2:.2f}")
        table.add_row(*row)
    Console(width=160).print(table)
    RESULTS.mkdir(exist_ok=True)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    mean = [statistics.mean(c) for c in curve]
    (RESULTS / "train_demo.json").write_text(
        json.dumps({"machine": machine, "mean_success": mean, "runs": runs}, indent=1)
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 0
    fig, ax = plt.subplots(figsize=(8, 4))
    xs = list(range(1, steps + 1))
    ax.fill_between(xs, [min(c) for c in curve], [max(c) for c in curve], color="0.5", alpha=0.2, label="seed range")
    ax.plot(xs, mean, color="black", linewidth=2.2, label=f"mean of {len(runs)} seeds")
    for k, (name, m) in enumerate(runs.items()):
        (line,) = ax.plot([x["step"] for x in m], [x["success"] for x in m], marker="o", ms=3, lw=0.8, label=name)
        for x in m:
            for c in x["level_changes"]:
                ax.axvline(x["step"], color=line.get_color(), linestyle=":", lw=0.8)
                ax.annotate(
                    f"L{c['old_level']}→{c['new_level']}",
                    (x["step"], 0.02 + 0.05 * k),
                    color=line.get_color(),
                    fontsize=7,
                )
    ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax.set(xlabel="training step (16 episodes each)", ylabel="success rate", ylim=(-0.02, 1.02))
    ax.set_title("SmolLM2-135M on demo:EchoTarget, PERPO + evolution, CPU (dotted: level changes)")
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(RESULTS / "train_demo.png", dpi=110)
    print(f"wrote {RESULTS / 'train_demo.json'} and {RESULTS / 'train_demo.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
