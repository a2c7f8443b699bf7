"""``gymverse train``: registered into the core CLI through the ``gymverse.cli`` entry-point group (`register`).

Exit codes: 0 the run finished, 1 training failed (the error is printed; the last checkpoint is kept),
2 bad usage (unknown env or algo, missing model, no checkpoint to resume).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gymverse.command_line import complexity_arg, positive_int_arg
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from gymverse_train.advantages import ALGOS


def _int_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``train`` options."""
    p.add_argument("--model", default="smollm2", help="'smollm2' (offline SmolLM2-135M-Instruct) or a local HF dir")
    p.add_argument(
        "--envs",
        default="demo:EchoTarget",
        help="comma-separated env ids or an evaluation's manifest.json (default demo:EchoTarget)",
    )
    p.add_argument("--steps", type=positive_int_arg, default=40, help="training steps (default 40)")
    p.add_argument("--algo", choices=ALGOS, default="perpo", help="advantage estimator (default perpo)")
    p.add_argument("--evolve", action="store_true", help="PERPO complexity evolution per env")
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter (peft) instead of all weights")
    p.add_argument("--out", default="runs/train", help="output directory (default runs/train)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompts", type=positive_int_arg, default=4, help="env instances per env per step (default 4)")
    p.add_argument("--group-size", type=positive_int_arg, default=4, help="episodes per instance (default 4)")
    p.add_argument("--complexity", type=complexity_arg, default=1, help="initial complexity level 1..10 (default 1)")
    p.add_argument("--max-turns", type=positive_int_arg, default=None, help="turn cap per episode")
    p.add_argument("--horizon-rounds", type=_int_list, default=None, help="stepwise turn caps, e.g. 2,4,8")
    p.add_argument("--horizon-every", type=positive_int_arg, default=10, help="steps per horizon round")
    p.add_argument("--patience", type=positive_int_arg, default=3, help="evolution patience (default 3)")
    p.add_argument("--promote-at", type=float, default=0.8, help="success rate that promotes (default 0.8)")
    p.add_argument("--max-new-tokens", type=positive_int_arg, default=48, help="tokens per reply (default 48)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--epochs", type=positive_int_arg, default=1, help="PPO epochs per batch (1: REINFORCE)")
    p.add_argument("--minibatches", type=positive_int_arg, default=1, help="optimizer steps per epoch")
    p.add_argument("--micro-batch", type=positive_int_arg, default=8, help="sequences per forward pass")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ...")
    p.add_argument("--threads", type=positive_int_arg, default=None, help="torch CPU threads")
    p.add_argument("--save-every", type=int, default=10, help="checkpoint every N steps (0: only at the end)")
    p.add_argument("--time-limit", type=float, default=None, help="stop after the step that passes N minutes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (one line per step instead)")


def register(subparsers: Any) -> None:
    """Entry point of the ``gymverse.cli`` group: add ``train`` to the core CLI."""
    p = subparsers.add_parser("train", help="train a local model on envs with PERPO (one machine)")
    add_arguments(p)
    p.set_defaults(handler=run)


def _config(args: argparse.Namespace) -> Any:
    from gymverse.manifest import expand_env_ids

    from gymverse_train.config import TrainConfig

    return TrainConfig(
        model=args.model,
        envs=expand_env_ids([e.strip() for e in args.envs.split(",") if e.strip()]),  # a manifest: its envs
        steps=args.steps,
        algo=args.algo,
        evolve=args.evolve,
        lora=args.lora,
        seed=args.seed,
        prompts_per_env=args.prompts,
        group_size=args.group_size,
        level=args.complexity,
        max_turns=args.max_turns,
        horizon_rounds=args.horizon_rounds,
        horizon_every=args.horizon_every,
        patience=args.patience,
        promote_at=args.promote_at,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        lr=args.lr,
        epochs=args.epochs,
        minibatches=args.minibatches,
        micro_batch=args.micro_batch,
        device=args.device,
        threads=args.threads,
        save_every=args.save_every,
    )


def _line(m: dict[str, Any], eta: float | None) -> str:
    levels = " ".join(f"{e}={lvl}" for e, lvl in m["levels"].items()) or "-"
    events = "".join(f" [{c['reason']} {c['env_id']} {c['old_level']}->{c['new_level']}]" for c in m["level_changes"])
    left = f" eta {eta:.0f}s" if eta is not None else ""
    return (
        f"step {m['step']}: success {m['success']:.2f} return {m['return']:+.3f} levels {levels} "
        f"{m['tokens_per_s']:.0f} tok/s {m['step_s']:.1f}s{left}{events}"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``gymverse train``."""
    from gymverse.registry import spec

    from gymverse_train.report import write_report
    from gymverse_train.trainer import Trainer

    err = Console(stderr=True)
    try:
        if args.resume:
            trainer = Trainer.resume(args.out, steps=args.steps)
        else:
            config = _config(args)
            for env_id in config.envs:
                spec(env_id)
            if (Path(args.out) / "metrics.jsonl").exists():
                raise ValueError(f"{args.out} already holds a run: pass --resume or another --out")
            trainer = Trainer(config, args.out)
    except (ValueError, FileNotFoundError, ImportError, KeyError, LookupError) as exc:
        print(f"gymverse train: error: {exc}", file=sys.stderr)
        return 2
    total, start_step, started = trainer.config.steps, trainer.step, time.perf_counter()
    interactive = err.is_terminal and not args.no_progress
    progress = Progress(
        TextColumn("[bold]train"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not interactive,
    )

    def on_step(m: dict[str, Any]) -> None:
        done = m["step"] - start_step
        eta = (time.perf_counter() - started) / done * (total - m["step"]) if done else None
        progress.update(task, completed=m["step"], description=f"success {m['success']:.2f}")
        if interactive:
            if m["level_changes"]:
                progress.console.print(_line(m, eta))
        else:
            print(_line(m, eta), file=sys.stderr, flush=True)

    with progress:
        task = progress.add_task("starting", total=total, completed=start_step)
        try:
            trainer.run(on_step=on_step, time_limit_s=args.time_limit * 60 if args.time_limit else None)
        except Exception as exc:
            print(
                f"gymverse train: training failed at step {trainer.step + 1}: {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
            return 1
    paths = write_report(args.out)
    print(f"trained {trainer.step} steps; metrics, trajectories and checkpoint in {args.out}")
    for p in paths:
        print(f"  {p}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``gymverse-train`` as a standalone command (same options as ``gymverse train``)."""
    parser = argparse.ArgumentParser(prog="gymverse train")
    add_arguments(parser)
    return run(parser.parse_args(argv))
