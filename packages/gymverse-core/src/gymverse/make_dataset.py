"""The ``make-dataset`` command the framework adapters share: its flags, and running a dataset writer on them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def add_dataset_arguments(
    parser: argparse.ArgumentParser, *, suffix: str, complexity: int | None = None, split: bool = False
) -> None:
    """Add ``--envs --n --out --seed --complexity`` (and ``--split`` with `split`) for `suffix` output files."""
    example = "game:GuessTheNumber,logic:Nonogram"
    parser.add_argument(
        "--envs", required=True, help=f"comma-separated env ids, e.g. {example}, or an evaluation's manifest.json"
    )
    parser.add_argument("--n", type=int, required=True, help="rows (episodes) per env")
    parser.add_argument("--out", required=True, help=f"output {suffix} path")
    parser.add_argument("--seed", type=int, default=0, help="seed the episodes' seeds come from (default 0)")
    default = f"default {complexity}" if complexity is not None else "default: the curriculum's or the env's"
    parser.add_argument("--complexity", type=int, default=complexity, help=f"starting level 1..10 ({default})")
    if split:
        parser.add_argument("--split", default="train", help="'val' for validation rows (fixed evaluation level)")


def run_dataset_writer(args: argparse.Namespace, write: Callable[[list[str]], str], *, prog: str) -> int:
    """Call `write` with the env ids of ``--envs`` (a manifest path among them stands for its envs) and print the
    line it returns; exit code 2 on its ValueError."""
    from gymverse.manifest import expand_env_ids

    try:
        envs = expand_env_ids([e.strip() for e in args.envs.split(",") if e.strip()])
        summary = write(envs)
    except ValueError as err:  # an unknown env id, a bad --n or --complexity: the user's input, not a crash
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    print(summary)
    return 0
