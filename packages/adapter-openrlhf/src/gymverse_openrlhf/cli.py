"""``gymverse-openrlhf``: the agent file's path, the prompt dataset, and the Ray runtime_env of a run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from gymverse.cli.dataset import add_dataset_arguments, run_dataset_writer

from gymverse_openrlhf.labels import INPUT_KEY, LABEL_KEY, dataset_rows


def agent_path() -> str:
    """Absolute path of the shipped agent file (for ``--train.agent_func_path``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_func.py")


def make_dataset(
    env_ids: Sequence[str], n: int, out: str, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> int:
    """Write `n` prompts per env as JSONL (keys `INPUT_KEY`, `LABEL_KEY`); returns the number of rows."""
    rows = list(dataset_rows(env_ids, n, seed=seed, complexity=complexity, split=split))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    p = argparse.ArgumentParser(prog="gymverse-openrlhf", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("agent-path", help="print the path to pass as --train.agent_func_path")
    d = sub.add_parser("make-dataset", help="write a prompt dataset (JSONL) for OpenRLHF")
    add_dataset_arguments(d, suffix=".jsonl", split=True)
    sub.add_parser(
        "runtime-env", help="print the Ray runtime_env JSON for the training flags that follow (`ray job submit`)"
    )
    args, extra = p.parse_known_args(argv)
    if extra and args.cmd != "runtime-env":
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.cmd == "agent-path":
        print(agent_path())
    elif args.cmd == "make-dataset":

        def write(envs: list[str]) -> str:
            count = make_dataset(envs, args.n, args.out, seed=args.seed, complexity=args.complexity, split=args.split)
            return f"wrote {count} prompts to {args.out} (--data.input_key {INPUT_KEY} --data.label_key {LABEL_KEY})"

        return run_dataset_writer(args, write, prog="gymverse-openrlhf")
    else:
        from gymverse_openrlhf.config import split_argv
        from gymverse_openrlhf.patch import runtime_env

        cfg, _ = split_argv(extra)  # the rest of a pasted training command only contributes --ckpt.*
        print(json.dumps(runtime_env(cfg)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
