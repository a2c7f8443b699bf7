"""``gymverse-rl2``: the env file's path, the dataset, and the training launcher."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gymverse.cli.dataset import add_dataset_arguments, run_dataset_writer


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    p = argparse.ArgumentParser(prog="gymverse-rl2", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env-path", help="print the path to pass as rollout.env_path")
    d = sub.add_parser("make-dataset", help="write an RL2 dataset (JSONL) of GymVerse episodes")
    add_dataset_arguments(d, suffix=".jsonl", split=True)
    sub.add_parser("train", help="run RL2's PPO with GymVerse (same as python -m gymverse_rl2.train)", add_help=False)
    args, extra = p.parse_known_args(argv)
    if args.cmd == "train":
        from gymverse_rl2.train import main as train

        train(extra)
        return 0
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.cmd == "env-path":
        from gymverse_rl2.train import env_path

        print(env_path())
        return 0
    from gymverse_rl2.dataset import write_dataset

    def write(envs: list[str]) -> str:
        count = write_dataset(envs, args.n, args.out, seed=args.seed, complexity=args.complexity, split=args.split)
        return f"wrote {count} rows to {args.out}"

    return run_dataset_writer(args, write, prog="gymverse-rl2")


if __name__ == "__main__":
    sys.exit(main())
