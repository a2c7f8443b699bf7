"""``gymverse-openrlhf``: the agent file's path, and the dataset: rows ``{"prompt": first observation, "label":
EpisodeSpec JSON}`` in core's one row and seed scheme (`episode_specs`); OpenRLHF hands an agent only these two."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

from gymverse.make_dataset import add_dataset_arguments, run_dataset_writer

INPUT_KEY, LABEL_KEY = "prompt", "label"


def agent_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_func.py")


def initial_observation(env_id: str, seed: int | None, complexity: int | None) -> str:
    from gymverse.registry import make

    env = make(env_id, **({} if complexity is None else {"complexity": complexity}))
    try:
        return env.reset(seed=seed)[0]
    finally:
        env.close()


def make_dataset(
    env_ids: Sequence[str], n: int, out: str, *, seed: int = 0, complexity: int | None = None, split: str = "train"
) -> int:
    from gymverse.rollout.dataset import episode_specs

    specs = episode_specs(env_ids, n, seed=seed, complexity=complexity, split=split)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        for s in specs:
            row = {INPUT_KEY: initial_observation(s.env_id, s.seed, s.complexity), LABEL_KEY: json.dumps(s.to_dict())}
            fh.write(json.dumps(row) + "\n")
    return len(specs)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gymverse-openrlhf", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("agent-path", help="print the path to pass as --train.agent_func_path")
    add_dataset_arguments(sub.add_parser("make-dataset", help="write the prompts (JSONL)"), suffix=".jsonl", split=True)
    args = p.parse_args(argv)
    if args.cmd == "agent-path":
        print(agent_path())
        return 0

    def write(envs: list[str]) -> str:
        count = make_dataset(envs, args.n, args.out, seed=args.seed, complexity=args.complexity, split=args.split)
        return f"wrote {count} prompts to {args.out} (--data.input_key {INPUT_KEY} --data.label_key {LABEL_KEY})"

    return run_dataset_writer(args, write, prog="gymverse-openrlhf")
