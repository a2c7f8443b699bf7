"""``python -m gymverse_openrlhf.train <OpenRLHF train_ppo_ray arguments> --gymverse.<options>``.

Reads and removes the ``--gymverse.*`` flags, starts Ray with a runtime_env that installs GymVerse in every
worker (`gymverse_openrlhf.patch`), starts the curriculum actor when ``--gymverse.evolve`` is on (restoring its
state from ``--ckpt.path`` when ``--ckpt.load_enable`` is set), then runs OpenRLHF's own entry point
``openrlhf.cli.train_ppo_ray`` as ``__main__`` with the remaining arguments, so every OpenRLHF flag and check
behaves as with ``python -m openrlhf.cli.train_ppo_ray``.
"""

from __future__ import annotations

import logging
import runpy
import sys
from collections.abc import Sequence

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig, split_argv

ENTRY = "openrlhf.cli.train_ppo_ray"
logger = logging.getLogger("gymverse_openrlhf")


def prepare(argv: Sequence[str]) -> tuple[GymVerseConfig, list[str]]:
    """Config and OpenRLHF arguments; adds our agent file when none is given and GymVerse is on."""
    from gymverse_openrlhf.cli import agent_path

    cfg, rest = split_argv(argv)
    if cfg.active and not any(a == "--train.agent_func_path" or a.startswith("--train.agent_func_path=") for a in rest):
        rest += ["--train.agent_func_path", agent_path()]
    return cfg, rest


def start(cfg: GymVerseConfig) -> None:
    """Export the config, patch this process, start Ray with the GymVerse runtime_env and the curriculum actor."""
    import os

    import ray

    from gymverse_openrlhf.patch import driver_runtime_env, install

    os.environ[ENV_VAR] = cfg.to_json()
    install(cfg)
    if not ray.is_initialized():
        ray.init(runtime_env=driver_runtime_env(cfg))
    if cfg.evolve:
        from gymverse_openrlhf.curriculum import create_actor

        create_actor(cfg)


def main(argv: Sequence[str] | None = None) -> None:
    """Launch OpenRLHF's PPO training with GymVerse installed."""
    cfg, rest = prepare(sys.argv[1:] if argv is None else argv)
    start(cfg)
    sys.argv = [ENTRY, *rest]
    runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
