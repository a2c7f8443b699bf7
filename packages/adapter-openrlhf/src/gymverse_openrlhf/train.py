"""``python -m gymverse_openrlhf.train <OpenRLHF train_ppo_ray arguments> --gymverse.<options>``: OpenRLHF's own
``openrlhf.cli.train_ppo_ray`` as ``__main__``; once OpenRLHF parsed its arguments (``hierarchize``) the launcher
refuses what GymVerse cannot keep consistent, then starts Ray and the run's curriculum (stopped at the end)."""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any

from gymverse.curriculum import connect_ray_curriculum

from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig, split_argv, with_openrlhf

ENTRY, CONFIG = "openrlhf.cli.train_ppo_ray", "openrlhf.utils.config"


def refusal(cfg: GymVerseConfig, args: Any) -> str | None:
    """Why OpenRLHF's parsed `args` cannot run with `cfg` (one line), or None."""
    train, kl, estimator, perpo = args.train, args.algo.kl, args.algo.advantage.estimator, cfg.norm != "off"
    if train.partial_rollout_enable or train.async_enable:
        flag = "--train.partial_rollout_enable" if train.partial_rollout_enable else "--train.async_enable"
        return f"{flag}: episodes would mix weights, curriculum levels lag a batch; GymVerse runs synchronous rollouts"
    if perpo and estimator != "reinforce":
        return f"--algo.advantage.estimator {estimator}: PERPO replaces it; pass --algo.advantage.estimator reinforce"
    if perpo and kl.init_coef > 0 and not kl.use_loss:
        return f"--algo.kl.init_coef {kl.init_coef} without --algo.kl.use_loss: KL in the reward, PERPO has none there"
    from transformers import AutoConfig

    model = AutoConfig.from_pretrained(args.actor.model_name_or_path, trust_remote_code=True)  # as OpenRLHF loads it
    limit = getattr(model, "max_position_embeddings", None)
    if limit is not None and args.data.max_len > limit:
        return (
            f"--data.max_len {args.data.max_len} (vLLM's max_model_len) > the model's max_position_embeddings {limit}"
        )
    return None


def start(cfg: GymVerseConfig, load: bool = False) -> str | None:
    """Export the config, patch this process, start Ray with the GymVerse runtime_env and the curriculum actor
    (keeping no handle: it is detached); returns the actor's name."""
    import ray

    from gymverse_openrlhf.curriculum import actor_name, create_actor, resumed_folder
    from gymverse_openrlhf.patch import install, runtime_env

    os.environ[ENV_VAR] = cfg.to_json()
    install(cfg)
    if not ray.is_initialized():
        ray.init(runtime_env=runtime_env(cfg))
    if not cfg.curriculum.active:
        return None
    create_actor(cfg, resumed_folder(cfg.ckpt_path) if load else None)
    return actor_name()


def main(argv: Sequence[str] | None = None) -> None:
    from gymverse_openrlhf.cli import agent_path
    from gymverse_openrlhf.patch import on_import, unwrap, wrap

    cfg, rest = split_argv(sys.argv[1:] if argv is None else argv)
    if cfg.active and not any(a.split("=")[0] == "--train.agent_func_path" for a in rest):
        rest += ["--train.agent_func_path", agent_path()]
    actors: list[str | None] = []

    def checked(hierarchize: Any) -> Any:
        def after_parse(args: Any) -> Any:
            args = hierarchize(args)
            if cfg.active and (reason := refusal(cfg, args)) is not None:
                raise SystemExit(f"gymverse: {reason}")
            if cfg.active:
                actors.append(start(with_openrlhf(cfg, args), load=args.ckpt.load_enable))
            return args

        return after_parse

    on_import(CONFIG, lambda module: wrap(module, "hierarchize", checked), key="gymverse-launcher")
    sys.argv = [ENTRY, *rest]
    try:
        runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)
    finally:
        unwrap(sys.modules.get(CONFIG), "hierarchize")
        for name in filter(None, actors):
            connect_ray_curriculum(name).stop()


if __name__ == "__main__":
    main()
