"""``gymverse-verl`` command line: ``gymverse-verl make-dataset --envs a,b --n 256 --out train.parquet``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gymverse.cli.dataset import add_dataset_arguments, run_dataset_writer

from gymverse_verl.dataset import make_rows, write_parquet


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gymverse-verl", description="GymVerse tools for verl")
    sub = p.add_subparsers(dest="command", required=True)
    ds = sub.add_parser("make-dataset", help="write a parquet of GymVerse episodes for verl")
    add_dataset_arguments(ds, suffix=".parquet", complexity=1, split=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)

    def write(envs: list[str]) -> str:
        rows = make_rows(envs, args.n, seed=args.seed, complexity=args.complexity, split=args.split)
        write_parquet(rows, args.out)
        return f"wrote {len(rows)} rows ({len(envs)} envs x {args.n}) to {args.out}"

    return run_dataset_writer(args, write, prog="gymverse-verl")


if __name__ == "__main__":
    raise SystemExit(main())
