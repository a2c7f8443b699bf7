"""``gymverse-oat``: the reference recipe's launch script on GymVerse envs (oat's own flags, plus ours): tyro
parses `GymVerseArgs`, oat's `default_args_validation` checks them, and oat's `get_program` with our learner and
actor runs under launchpad. Modes that would break curriculum or weight consistency are refused with a reason."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any

import tyro

from gymverse_oat.args import GymVerseArgs


def parse_args(argv: Sequence[str] | None = None) -> GymVerseArgs:
    """Flags -> validated args (the reference's customizations applied: PPO, no oracle, no prompt data)."""
    from oat.args import default_args_validation

    with warnings.catch_warnings():
        # oat annotates optional fields as plain `str`/`int` with a None default; tyro copes but warns on each
        warnings.filterwarnings("ignore", message=r"The field .* is annotated with type", category=UserWarning)
        args = tyro.cli(GymVerseArgs, args=list(sys.argv[1:] if argv is None else argv))
    args.algo = "PPO"
    args.oracle = ""
    args.prompt_data = ""
    per_step = args.rollout_batch_size_per_device * args.gpus
    if args.rollout_batch_size % per_step:  # oat learns every rollout_batch_size / per_step collections
        raise ValueError(
            f"--rollout_batch_size {args.rollout_batch_size} must be a multiple of --rollout_batch_size_per_device "
            f"x --gpus = {per_step} (oat updates every rollout_batch_size / that many collections)"
        )
    if args.asynchronous:
        raise ValueError(
            "--asynchronous is not supported: actors would collect the next batch with the previous weights and "
            "curriculum levels (levels lag a step, episodes mix two policies); drop --asynchronous"
        )
    args.curriculum_config()  # fail on bad --env_id / curriculum flags before any process starts
    validated: GymVerseArgs = default_args_validation(args)
    return validated


def train(args: GymVerseArgs, learner_cls: type | None = None, actor_cls: type | None = None) -> None:
    """Build oat's program with the GymVerse learner and actor and launch it."""
    from oat.interface import get_program, lp

    from gymverse_oat.actor import GymVerseActor
    from gymverse_oat.learner import GymVerseLearner

    program, local_resources = get_program(
        args, learner_cls=learner_cls or GymVerseLearner, actor_cls=actor_cls or GymVerseActor
    )
    lp.launch(program, launch_type=args.launch_type, local_resources=local_resources, terminal="current_terminal")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gymverse-oat`` (a refused configuration exits with its one-line reason)."""
    try:
        args: Any = parse_args(argv)
    except ValueError as err:
        raise SystemExit(f"gymverse-oat: {err}") from None
    train(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
