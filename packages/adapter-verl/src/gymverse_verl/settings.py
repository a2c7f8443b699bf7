"""The ``gymverse`` section of a verl config (``+gymverse.evolve=true +gymverse.patience=2 ...``).

Curriculum knobs are `CurriculumOptions`' own names (``evolve``, ``initial_level``, ``promote_at``, ``demote_at``,
``patience``, ``max_turns``, ``horizon``: ``8``/``"4,8,12"``/``[4,8,12]``, ``horizon_interval``, ``eval_level``,
``eval_max_turns``); the rest are `GymVerseSettings`'. Unknown keys are rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from gymverse.curriculum import CurriculumOptions, RayCurriculum, run_scoped_name, start_ray_curriculum
from gymverse.curriculum.options import KNOBS, parse_value
from gymverse.curriculum.service import DEFAULT_NAMESPACE
from gymverse.perpo import DEFAULT_EPS
from gymverse.pool import DEFAULT_RESET_TIMEOUT, DEFAULT_STEP_TIMEOUT

from gymverse_verl import ADV_ESTIMATOR, CURRICULUM_ACTOR, TRAINER_MODE

DEFAULT_SYSTEM_PROMPT = "You are an agent in a text environment. Reply with your next action in the format it asks for."


def plain(value: Any) -> Any:
    """OmegaConf containers to plain Python (a no-op for dicts and lists)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _get(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=None) if OmegaConf.is_config(config) else None


def curriculum_options(raw: Mapping[str, Any]) -> CurriculumOptions:
    """`CurriculumOptions` from Hydra values (already typed, or strings when quoted on the command line)."""
    values = {}
    for key, value in raw.items():
        if key == "horizon":  # `+gymverse.horizon=8`, `'+gymverse.horizon="4,8,12"'` or `'...=[4,8,12]'`
            value = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value or "")
        elif isinstance(value, str):
            value = parse_value(CurriculumOptions, key, value, prefix="gymverse.")
        values[key] = value
    return CurriculumOptions.from_dict(values, prefix="gymverse.")


@dataclass(frozen=True)
class GymVerseSettings:
    """Adapter settings; every key is optional. Env step/reset timeouts are on by default (core's defaults)."""

    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_tokens_per_turn: int | None = None
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)  # {env_id: constructor kwargs}
    step_timeout: float | None = DEFAULT_STEP_TIMEOUT
    reset_timeout: float | None = DEFAULT_RESET_TIMEOUT
    actor_name: str = CURRICULUM_ACTOR
    actor_namespace: str = DEFAULT_NAMESPACE
    eps: float = DEFAULT_EPS  # PERPO normalization epsilon

    @classmethod
    def from_config(cls, config: Any) -> GymVerseSettings:
        """Settings from a full verl config (its ``gymverse`` key)."""
        return cls.from_dict(plain(_get(config, "gymverse")) or {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GymVerseSettings:
        """Settings from the plain ``gymverse`` section; unknown keys raise a ValueError naming them."""
        own = {f.name for f in fields(cls)} - {"curriculum"}
        unknown = sorted(set(data) - own - set(KNOBS))
        if unknown:
            known = sorted(own | set(KNOBS))
            raise ValueError(f"unknown setting(s) {['gymverse.' + k for k in unknown]}; known: {known}")
        knobs = {k: v for k, v in data.items() if k in KNOBS}
        return cls(curriculum_options(knobs), **{k: v for k, v in data.items() if k in own})

    def curriculum_service(self, *, fresh: bool = False) -> RayCurriculum:
        """This run's curriculum actor, named per Ray job (two runs on one cluster never share or replace one)."""
        name = run_scoped_name(self.actor_name)
        config = self.curriculum.to_config()
        return start_ray_curriculum(config, name=name, namespace=self.actor_namespace, reuse=not fresh)


def check_verl_config(config: Any) -> None:
    """Refuse, in one line naming the setting, verl configs that would break the curriculum or PERPO: verl's
    async/colocate v1 modes (only the GymVerse trainer closes curriculum steps and hands records to the estimator)
    and KL-in-reward with PERPO (PERPO returns are built from the env's turn rewards only)."""
    settings = GymVerseSettings.from_config(config)
    perpo = _get(config, "algorithm.adv_estimator") == ADV_ESTIMATOR
    if perpo and _get(config, "algorithm.use_kl_in_reward"):
        raise ValueError(
            f"algorithm.use_kl_in_reward=true is not supported with algorithm.adv_estimator={ADV_ESTIMATOR} "
            "(PERPO returns come from the env's turn rewards, the KL penalty would be dropped): set "
            "algorithm.use_kl_in_reward=false and use actor_rollout_ref.actor.use_kl_loss=true"
        )
    mode = _get(config, "trainer.v1.trainer_mode")
    needs = ["gymverse.evolve / gymverse.horizon"] if settings.curriculum.active else []
    needs += [f"algorithm.adv_estimator={ADV_ESTIMATOR}"] if perpo else []
    if mode not in (None, TRAINER_MODE) and needs:  # None: not a v1 trainer config (e.g. a bare agent-loop one)
        raise ValueError(
            f"trainer.v1.trainer_mode={mode} is not supported with {' and '.join(needs)} (only the GymVerse trainer "
            f"closes curriculum steps and hands episode records to PERPO): set trainer.v1.trainer_mode={TRAINER_MODE}"
        )
