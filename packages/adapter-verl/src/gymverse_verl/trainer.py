"""`GymVersePPOTrainer`: verl's synchronous v1 trainer plus env ids for PERPO, curriculum steps and checkpoints.

Select it with ``trainer.v1.trainer_mode=gymverse_sync``. On top of `PPOTrainerSync` it

* reads each row's ``extra_fields`` (env id, per-turn rewards, success) from the TransferQueue before verl's own
  ``_compute_advantage`` runs, and exposes them to the ``gymverse_perpo`` estimator (`episode_batch`);
* after each training step, sends the step's per-env success to the curriculum actor once (before the step's
  checkpoint is written, so a checkpoint holds the curriculum that the next step's rollouts will use);
* writes the curriculum state next to verl's checkpoint (``global_step_N/gymverse_curriculum.json``) and restores
  it on resume.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import ray
import transfer_queue as tq
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from gymverse_verl import ADV_ESTIMATOR, CHECKPOINT_FILE, TRAINER_MODE
from gymverse_verl.advantage import EpisodeBatch, episode_batch
from gymverse_verl.curriculum import curriculum_actor
from gymverse_verl.settings import GymVerseSettings

logger = logging.getLogger(__name__)


def _as_list(value: Any) -> list[Any]:
    """TransferQueue / tensordict non-tensor columns to a Python list."""
    if hasattr(value, "tolist"):
        return list(value.tolist())
    if hasattr(value, "data"):
        data = value.data
        return list(data) if isinstance(data, list | tuple) else [data]
    return list(value)


def episode_rows(uids: Sequence[Any], extra_fields: Sequence[Mapping[str, Any] | None], eps: float) -> EpisodeBatch:
    """The estimator's view of a batch: env id and per-turn rewards per row (non-GymVerse rows keep their uid)."""
    env_ids, turns = [], []
    for uid, extra in zip(uids, extra_fields, strict=True):
        extra = extra or {}
        env_ids.append(str(extra.get("env_id") or f"uid:{uid}"))
        tr = extra.get("turn_rewards")
        turns.append(None if tr is None else [float(x) for x in tr])
    return EpisodeBatch(env_ids=env_ids, turn_rewards=turns, uids=list(uids), eps=eps)


def success_by_env(extra_fields: Sequence[Mapping[str, Any] | None]) -> dict[str, list[bool]]:
    """Per env id, the success flags of the GymVerse episodes among `extra_fields`."""
    out: dict[str, list[bool]] = {}
    for extra in extra_fields:
        if extra and extra.get("env_id"):
            out.setdefault(str(extra["env_id"]), []).append(bool(extra.get("success", False)))
    return out


def resume_folder(trainer_config: Any) -> str | None:
    """The ``global_step_N`` folder verl resumes from under this config (None when starting fresh)."""
    mode = trainer_config.resume_mode
    if mode == "disable":
        return None
    if mode == "resume_path":
        folder = str(trainer_config.resume_from_path)
    else:
        folder = find_latest_ckpt_path(os.path.abspath(str(trainer_config.default_local_dir)))
        if folder is None:
            return None
    return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)


def save_curriculum(actor: Any, folder: str) -> str:
    """Write the curriculum actor's state into a checkpoint folder; returns the file path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, CHECKPOINT_FILE)
    state = ray.get(actor.state_dict.remote())
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)  # never leave a half-written file behind
    return path


def load_curriculum(actor: Any, folder: str) -> bool:
    """Restore the curriculum from a checkpoint folder; False when the folder has no GymVerse state."""
    path = os.path.join(folder, CHECKPOINT_FILE)
    if not os.path.exists(path):
        return False
    with open(path) as f:
        ray.get(actor.load_state_dict.remote(json.load(f)))
    return True


@register_trainer(TRAINER_MODE)
class GymVersePPOTrainer(PPOTrainerSync):
    """`PPOTrainerSync` with GymVerse env grouping, curriculum steps and curriculum checkpoints."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.gymverse = GymVerseSettings.from_config(config)
        self._step_success: dict[str, list[bool]] = {}
        algo = config.algorithm
        if algo.get("adv_estimator") == ADV_ESTIMATOR and algo.get("use_kl_in_reward", False):
            # per-turn returns are built from the env's turn rewards, so a KL penalty folded into token rewards
            # would be dropped silently; PERPO runs should use the actor's KL loss instead
            msg = "%s ignores algorithm.use_kl_in_reward; use actor_rollout_ref.actor.use_kl_loss"
            logger.warning(msg, ADV_ESTIMATOR)

    @property
    def _curriculum(self) -> Any:
        actor = getattr(self, "_curriculum_actor", None)
        if actor is None:
            actor = self._curriculum_actor = curriculum_actor(self.gymverse)
        return actor

    def _uses_curriculum(self) -> bool:
        return self.gymverse.evolution or self.gymverse.horizon is not None

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "extra_fields"])
        uids = _as_list(data["uid"])
        extras = _as_list(data["extra_fields"])
        for env_id, flags in success_by_env(extras).items():
            self._step_success.setdefault(env_id, []).extend(flags)
        with episode_batch(episode_rows(uids, extras, self.gymverse.eps)):
            return super()._compute_advantage(batch, metrics)

    def step(self, metrics: dict, timing_raw: dict) -> Any:
        """One training step, then one curriculum update from the step's per-env success."""
        self._step_success = {}
        out = super().step(metrics, timing_raw)
        for env_id, flags in self._step_success.items():
            metrics[f"gymverse/{env_id}/success"] = sum(flags) / len(flags)
        if self._uses_curriculum():
            events = ray.get(self._curriculum.end_step.remote(self._step_success))
            for e in events:
                logger.info(
                    "GymVerse %s: level %s -> %s (%s)", e["env_id"], e["old_level"], e["new_level"], e["reason"]
                )
            for env_id, level in ray.get(self._curriculum.levels.remote()).items():
                metrics[f"gymverse/{env_id}/complexity"] = level
        return out

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        if self._uses_curriculum():
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            save_curriculum(self._curriculum, folder)

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if not self._uses_curriculum() or not self.global_steps:
            return
        folder = resume_folder(self.config.trainer)
        if folder is not None and not load_curriculum(self._curriculum, folder):
            logger.warning("Checkpoint %s has no %s: the curriculum starts fresh", folder, CHECKPOINT_FILE)
