"""``gymverse-verl`` command line: ``gymverse-verl make-dataset --envs a,b --n 256 --out train.parquet``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gymverse_verl.dataset import make_rows, write_parquet


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gymverse-verl", description="GymVerse tools for verl")
    sub = p.add_subparsers(dest="command", required=True)
    ds = sub.add_parser("make-dataset", help="write a parquet of GymVerse episodes for verl")
    ds.add_argument("--envs", required=True, help="comma-separated env ids, e.g. game:GuessTheNumber,logic:Nonogram")
    ds.add_argument("--n", type=int, required=True, help="rows (episodes) per env")
    ds.add_argument("--out", required=True, help="output .parquet path")
    ds.add_argument("--seed", type=int, default=0, help="seed for the episode seeds")
    ds.add_argument("--complexity", type=int, default=1, help="starting level 1..10 (evolution may change it)")
    ds.add_argument("--split", default="train")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    try:
        rows = make_rows(envs, args.n, seed=args.seed, complexity=args.complexity, split=args.split)
        write_parquet(rows, args.out)
    except ValueError as exc:
        print(f"gymverse-verl: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(rows)} rows ({len(envs)} envs x {args.n}) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
