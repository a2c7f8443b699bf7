"""``[torchrun ...] -m gymverse_rl2.train <RL2 overrides> gymverse.<name>=<value>``: in every rank, RL2's config is
composed and checked (`launch_settings`), RL2's hooks wrapped (`gymverse_rl2.patch`), RL2's own main run."""

from __future__ import annotations

import dataclasses
import os
import runpy
import sys
from collections.abc import Sequence
from typing import Any

from gymverse.pool import pool_size_for

from gymverse_rl2.settings import Settings, split_argv

ENTRY = "RL2.trainer.ppo"
_NULL_LENGTH = (
    "actor.max_length_per_device is null: RL2 packs every actor update by it and would crash at the first one; "
    "set it, e.g. actor.max_length_per_device=8192 (GymVerse caps each episode to it)"
)
_PERPO = "gymverse.perpo=true replaces RL2's reinforce advantages (or set gymverse.perpo=false)"
_KL = "PERPO returns never include KL; set actor.kl.type=loss (RL2's KL loss) or actor.kl.coef=0"
_PARTIAL = (
    "rollout.train.partial_rollout=true: RL2 would abort episodes and resume them after a weight update, a "
    "GymVerse episode cannot resume mid-turn; set rollout.train.partial_rollout=false"
)


def env_path() -> str:
    """Absolute path of the env file (for ``rollout.env_path``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "env.py")


def prepare(argv: Sequence[str]) -> tuple[Settings, list[str]]:
    """GymVerse settings and RL2's overrides, with ``rollout.env_path`` defaulting to the GymVerse env file."""
    settings, rest = split_argv(argv)
    if not any(a.lstrip("+").startswith("rollout.env_path=") for a in rest):
        rest.append(f"rollout.env_path={env_path()}")
    return settings, rest


def rl2_config(overrides: Sequence[str]) -> Any:
    """RL2's own PPO config (``RL2/trainer/config/ppo.yaml``) composed by Hydra with `overrides`."""
    import RL2
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(os.path.abspath(RL2.__file__)), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo", overrides=list(overrides))


def launch_settings(config: Any, settings: Settings) -> Settings:
    """`settings` with the token budget (RL2 asserts no packed sequence, prompt + response - 1 tokens, exceeds
    sp * tp * max_(inference_)length_per_device) and pool size of `config`; a ValueError names what to change."""
    from omegaconf import OmegaConf

    def get(key: str, default: Any = None) -> Any:
        value = OmegaConf.select(config, key, default=default)
        return default if value is None else value

    kl = get("actor.kl.type")
    for refused, reason in [
        (get("actor.max_length_per_device") is None, _NULL_LENGTH),
        (settings.perpo and get("adv.estimator", "reinforce") != "reinforce", f"set adv.estimator=reinforce: {_PERPO}"),
        (settings.perpo and get("actor.kl.coef", 0.0) > 0 and kl != "loss", f"actor.kl.type={kl}: {_KL}"),
        (bool(get("rollout.train.partial_rollout", False)), _PARTIAL),
    ]:
        if refused:
            raise ValueError(reason)
    caps = [
        int(get(f"{s}.sp_size", 1)) * int(get(f"{s}.tp_size", 1)) * int(get(f"{s}.{k}"))
        for s in ("actor", "ref_actor", "critic")
        for k in ("max_length_per_device", "max_inference_length_per_device")
        if get(f"{s}.{k}") is not None
    ]
    prompts = get("train_data.prompts_per_rollout", get("rollout.train.prompts_per_rollout"))
    responses = get("train_data.responses_per_prompt", get("rollout.train.responses_per_prompt", 1))
    pool = pool_size_for(int(prompts) * int(responses)) if prompts is not None else settings.pool_size
    return dataclasses.replace(settings, max_sequence_tokens=min(caps) + 1, pool_size=pool)


def main(argv: Sequence[str] | None = None) -> None:
    """Launch RL2's PPO trainer with GymVerse installed."""
    from gymverse_rl2.patch import install

    try:
        settings, rest = prepare(sys.argv[1:] if argv is None else argv)
        settings = launch_settings(rl2_config(rest), settings)
    except ValueError as err:
        raise SystemExit(f"gymverse_rl2.train: {err}") from None
    install(settings)
    sys.argv = [ENTRY, *rest]
    runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
