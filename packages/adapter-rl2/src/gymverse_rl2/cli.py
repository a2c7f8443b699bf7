"""``gymverse-rl2``: the env file's path, the dataset (core `EpisodeSpec` rows in RL2's ``extra_info``; pass the
file as ``train_data.path`` on 0.0.2, ``rollout.train.path`` on the head), and the training launcher."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from gymverse.make_dataset import add_dataset_arguments, run_dataset_writer
from gymverse.rollout import episode_specs


def write_dataset(env_ids: Sequence[str], n: int, out: str, **kwargs: Any) -> int:
    """RL2 rows ``{"extra_info": EpisodeSpec}`` (`episode_specs`; no prompt: the env's reset) to JSONL `out`."""
    rows = [{"extra_info": spec.to_dict()} for spec in episode_specs(env_ids, n, **kwargs)]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in rows)
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    p = argparse.ArgumentParser(prog="gymverse-rl2", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("env-path", help="print the path to pass as rollout.env_path")
    d = sub.add_parser("make-dataset", help="write an RL2 dataset (JSONL) of GymVerse episodes")
    add_dataset_arguments(d, suffix=".jsonl", split=True)
    sub.add_parser("train", help="run RL2's PPO with GymVerse (same as python -m gymverse_rl2.train)", add_help=False)
    args, extra = p.parse_known_args(argv)
    from gymverse_rl2.train import env_path
    from gymverse_rl2.train import main as train

    if args.cmd == "train":
        train(extra)
        return 0
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.cmd == "env-path":
        print(env_path())
        return 0
    opts = {"seed": args.seed, "complexity": args.complexity, "split": args.split}
    return run_dataset_writer(
        args, lambda envs: f"wrote {write_dataset(envs, args.n, args.out, **opts)} rows to {args.out}", prog=p.prog
    )


if __name__ == "__main__":
    sys.exit(main())
