"""``gymverse-verl make-dataset``: one parquet row per episode, ``extra_info`` = core's `EpisodeSpec.to_dict()`.

Rows and seeds are core's (`episode_specs`), so the same flags give the same episodes in every framework. verl's
``RLHFDataset`` needs a chat ``prompt`` column; the agent loop ignores it (the env's first observation is the real
prompt), so it carries a placeholder. ``agent_name`` routes the row to `GymVerseAgentLoop`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gymverse.make_dataset import add_dataset_arguments, run_dataset_writer
from gymverse.rollout import episode_specs

from gymverse_verl import AGENT_NAME


def make_rows(
    env_ids: Sequence[str], n: int, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> list[dict[str, Any]]:
    """`n` rows per env id (`episode_specs`); ``extra_info.index`` is the row's position, as verl expects."""
    specs = episode_specs(env_ids, n, seed=seed, complexity=complexity, split=split)
    return [
        {
            "data_source": s.env_id,
            "agent_name": AGENT_NAME,
            "prompt": [{"role": "user", "content": f"GymVerse episode: {s.env_id}"}],
            "extra_info": {**s.to_dict(), "index": i},
        }
        for i, s in enumerate(specs)
    ]


def check_split(rows: Iterable[tuple[Any, Any]], *, validation: bool, files: Any) -> None:
    """Fail if GymVerse rows (``(agent_name, extra_info)`` pairs) are in the wrong dataset for their split: a
    validation row without ``split: val`` would run at the evolving training level and be recorded as a training
    episode, a training row with it would run at the fixed evaluation level and never move the curriculum."""
    splits = [
        (i, extra.get("split") if isinstance(extra, Mapping) else None)
        for i, (a, extra) in enumerate(rows)
        if a == AGENT_NAME
    ]
    wrong = [(i, split) for i, split in splits if (split == "val") != validation]
    if not wrong:
        return
    where = f"{len(wrong)} of {len(splits)} GymVerse rows (first: row {wrong[0][0]}, extra_info.split={wrong[0][1]!r})"
    if validation:
        raise ValueError(
            f"data.val_files={files}: {where} lack extra_info.split='val', so they would run at the evolving "
            "training level and be recorded as training episodes; write the validation set with "
            "`gymverse-verl make-dataset ... --split val`"
        )
    raise ValueError(
        f"data.train_files={files}: {where} have extra_info.split='val', so they would run at the fixed evaluation "
        "level and never move the curriculum; write training rows without `--split val`"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="gymverse-verl", description="GymVerse tools for verl")
    sub = parser.add_subparsers(dest="command", required=True)
    ds = sub.add_parser("make-dataset", help="write a parquet of GymVerse episodes for verl")
    add_dataset_arguments(ds, suffix=".parquet", split=True)
    args = parser.parse_args(argv)

    def write(envs: list[str]) -> str:
        import pandas as pd  # a verl dependency, like pyarrow

        rows = make_rows(envs, args.n, seed=args.seed, complexity=args.complexity, split=args.split)
        pd.DataFrame(rows).to_parquet(args.out, index=False)
        return f"wrote {len(rows)} rows ({len(envs)} envs x {args.n}) to {args.out}"

    return run_dataset_writer(args, write, prog="gymverse-verl")


if __name__ == "__main__":
    raise SystemExit(main())
