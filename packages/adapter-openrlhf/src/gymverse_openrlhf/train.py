"""``python -m gymverse_openrlhf.train <OpenRLHF train_ppo_ray arguments> --gymverse.<options>``.

Removes the ``--gymverse.*`` flags and runs OpenRLHF's own entry point ``openrlhf.cli.train_ppo_ray`` as
``__main__`` with the rest, so every OpenRLHF flag and check behaves as with ``python -m
openrlhf.cli.train_ppo_ray``. Right after OpenRLHF parsed its arguments (`openrlhf.utils.config.hierarchize`),
and before it starts anything, the launcher refuses the modes GymVerse cannot keep consistent (`refusal`), then
starts Ray with the GymVerse runtime_env and the run's curriculum actor (restored from the checkpoint OpenRLHF
resumes with ``--ckpt.load_enable``); it stops that actor when training ends.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from typing import Any

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig, split_argv, with_openrlhf

ENTRY, CONFIG = "openrlhf.cli.train_ppo_ray", "openrlhf.utils.config"


def refusal(cfg: GymVerseConfig, args: Any) -> str | None:
    """Why OpenRLHF's parsed `args` cannot run with `cfg` (one line), or None."""
    if args.train.partial_rollout_enable or args.train.async_enable:
        flag = "--train.partial_rollout_enable" if args.train.partial_rollout_enable else "--train.async_enable"
        return (
            f"{flag}: OpenRLHF would generate while it trains, so episodes would mix weights and curriculum levels "
            "would lag a batch; GymVerse runs synchronous rollouts (drop the flag)"
        )
    if cfg.norm != "off" and args.algo.advantage.estimator != "reinforce":
        return (
            f"--algo.advantage.estimator {args.algo.advantage.estimator}: --gymverse.norm {cfg.norm} replaces "
            "OpenRLHF's estimator with PERPO; pass --algo.advantage.estimator reinforce"
        )
    if cfg.norm != "off" and args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
        return (
            f"--algo.kl.init_coef {args.algo.kl.init_coef} without --algo.kl.use_loss puts KL into the reward, and "
            "PERPO returns carry env rewards only: add --algo.kl.use_loss (KL as a loss) or pass --algo.kl.init_coef 0"
        )
    from transformers import AutoConfig

    model = AutoConfig.from_pretrained(args.actor.model_name_or_path, trust_remote_code=True)
    limit = getattr(model, "max_position_embeddings", None)
    if limit is not None and args.data.max_len > limit:
        return (
            f"--data.max_len {args.data.max_len} (every episode's token budget, and vLLM's max_model_len) exceeds "
            f"the model's max_position_embeddings {limit}: lower --data.max_len"
        )
    return None


def start(cfg: GymVerseConfig, load: bool = False) -> None:
    """Export the config, patch this process, start Ray with the GymVerse runtime_env and the curriculum actor."""
    import os

    import ray

    from gymverse_openrlhf.patch import install, runtime_env

    os.environ[ENV_VAR] = cfg.to_json()
    install(cfg)
    if not ray.is_initialized():
        ray.init(runtime_env=runtime_env(cfg))
    if cfg.curriculum.active:
        from gymverse_openrlhf.curriculum import create_actor, resumed_folder

        create_actor(cfg, resumed_folder(cfg.ckpt_path) if load else None)  # no handle kept: the actor is detached


def main(argv: Sequence[str] | None = None) -> None:
    """Launch OpenRLHF's PPO training with GymVerse installed."""
    from gymverse_openrlhf.cli import agent_path
    from gymverse_openrlhf.patch import on_import, unwrap, wrap

    cfg, rest = split_argv(sys.argv[1:] if argv is None else argv)
    if cfg.active and not any(a.split("=")[0] == "--train.agent_func_path" for a in rest):
        rest += ["--train.agent_func_path", agent_path()]
    started: list[GymVerseConfig] = []

    def checked(hierarchize: Any) -> Any:
        def after_parse(args: Any) -> Any:
            args = hierarchize(args)
            reason = refusal(cfg, args) if cfg.active else None
            if reason is not None:
                raise SystemExit(f"gymverse: {reason}")
            if cfg.active:
                started.append(with_openrlhf(cfg, args))
                start(started[0], load=args.ckpt.load_enable)
            return args

        return after_parse

    on_import(CONFIG, lambda module: wrap(module, "hierarchize", checked), key="gymverse-launcher")
    sys.argv = [ENTRY, *rest]
    try:
        runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)
    finally:
        unwrap(sys.modules[CONFIG], "hierarchize")
        if started and started[0].curriculum.active:
            from gymverse.curriculum import connect_ray_curriculum

            from gymverse_openrlhf.curriculum import actor_name

            connect_ray_curriculum(actor_name()).stop()

if __name__ == "__main__":
    main()
