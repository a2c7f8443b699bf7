"""`GymVersePPOTrainer`: verl's synchronous v1 trainer plus env ids for PERPO, curriculum steps and checkpoints.

Select it with ``trainer.v1.trainer_mode=gymverse_sync``. verl branches on the literal mode ``"sync"`` in many
places (replay buffer class, generation batch size, dataloader refill, TransferQueue checkpointing, re-issuing
in-flight prompts on resume), so this trainer reports ``trainer_mode == "sync"`` to all of them: it runs exactly
verl's synchronous path, and a resume never restores (and re-trains) trajectories of an earlier step.
On top of `PPOTrainerSync` it

* reads each row's ``extra_fields`` (env id, per-turn rewards, turn ends) from the TransferQueue before verl's own
  ``_compute_advantage`` runs, and exposes them to the ``gymverse_perpo`` estimator (`episode_batch`);
* starts the run's curriculum actor fresh, and closes one curriculum step after each training step (the agent
  loops recorded every episode of the step as it finished, before any filtering; the step is closed before the
  step's checkpoint is written, so a checkpoint holds the curriculum that the next step's rollouts will use);
* writes the curriculum state next to verl's checkpoint (``global_step_N/gymverse_curriculum.json``) and restores
  it on resume.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import transfer_queue as tq
from gymverse.curriculum import RayCurriculum
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from gymverse_verl import ADV_ESTIMATOR, CHECKPOINT_FILE, TRAINER_MODE
from gymverse_verl.advantage import EpisodeBatch, episode_batch
from gymverse_verl.curriculum import curriculum_service
from gymverse_verl.dataset import check_split
from gymverse_verl.settings import SYNC_MODE, GymVerseSettings, check_verl_config

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
    """The estimator's view of a batch: env id, per-turn rewards and turn ends per row (others keep their uid)."""
    env_ids, turns, ends = [], [], []
    for uid, extra in zip(uids, extra_fields, strict=True):
        extra = extra or {}
        env_ids.append(str(extra.get("env_id") or f"uid:{uid}"))
        tr, te = extra.get("turn_rewards"), extra.get("turn_ends")
        turns.append(None if tr is None else [float(x) for x in tr])
        ends.append(None if tr is None or te is None else [int(x) for x in te])
    return EpisodeBatch(env_ids=env_ids, turn_rewards=turns, uids=list(uids), eps=eps, turn_ends=ends)


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


@register_trainer(TRAINER_MODE)
class GymVersePPOTrainer(PPOTrainerSync):
    """`PPOTrainerSync` with GymVerse env grouping, curriculum steps and curriculum checkpoints."""

    @property
    def trainer_mode(self) -> str:
        """Always ``"sync"``: what verl's own mode checks must see for this trainer (see the module docstring)."""
        return SYNC_MODE

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:  # verl's __init__ assigns the configured mode name
        if value not in (TRAINER_MODE, SYNC_MODE):
            raise ValueError(f"GymVersePPOTrainer is selected by trainer.v1.trainer_mode={TRAINER_MODE}, got {value!r}")

    def __init__(self, config: Any) -> None:
        self.gymverse = GymVerseSettings.from_config(config)
        check_verl_config(config)
        super().__init__(config)
        if self.gymverse.uses_curriculum():  # a new run: replace any leftover actor of the same name
            self._curriculum_service = curriculum_service(self.gymverse, fresh=True)
        algo = config.algorithm
        if algo.get("adv_estimator") == ADV_ESTIMATOR and algo.get("use_kl_in_reward", False):
            # per-turn returns are built from the env's turn rewards, so a KL penalty folded into token rewards
            # would be dropped silently; PERPO runs should use the actor's KL loss instead
            msg = "%s ignores algorithm.use_kl_in_reward; use actor_rollout_ref.actor.use_kl_loss"
            logger.warning(msg, ADV_ESTIMATOR)

    @property
    def _curriculum(self) -> RayCurriculum:
        service = getattr(self, "_curriculum_service", None)
        if service is None:
            service = self._curriculum_service = curriculum_service(self.gymverse)
        return service

    def _init_dataloader(self) -> None:
        super()._init_dataloader()
        # the first thing `init()` does after the tokenizer: a mislabelled split fails before any GPU work
        for dataset, files, validation in (
            (self.train_dataset, self.config.data.train_files, False),
            (self.val_dataset, self.config.data.val_files, True),
        ):
            frame = getattr(dataset, "dataframe", None)
            if frame is not None and {"agent_name", "extra_info"} <= set(frame.column_names):
                check_split(zip(frame["agent_name"], frame["extra_info"]), validation=validation, files=files)

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "extra_fields"])
        with episode_batch(episode_rows(_as_list(data["uid"]), _as_list(data["extra_fields"]), self.gymverse.eps)):
            return super()._compute_advantage(batch, metrics)

    def step(self, metrics: dict, timing_raw: dict) -> Any:
        """One training step, then one curriculum step from the episodes the agent loops recorded."""
        out = super().step(metrics, timing_raw)
        if self.gymverse.uses_curriculum():
            report = self._curriculum.end_step()
            for env_id, rate in report.success.items():
                metrics[f"gymverse/{env_id}/success"] = rate
            for e in report.changes:
                logger.info(
                    "GymVerse %s: level %s -> %s (%s)", e["env_id"], e["old_level"], e["new_level"], e["reason"]
                )
            for env_id, level in report.levels.items():
                metrics[f"gymverse/{env_id}/complexity"] = level
        return out

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        if self.gymverse.uses_curriculum():
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            self._curriculum.save(os.path.join(folder, CHECKPOINT_FILE))

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if not self.gymverse.uses_curriculum() or not self.global_steps:
            return
        folder = resume_folder(self.config.trainer)
        if folder is not None and not self._curriculum.load(os.path.join(folder, CHECKPOINT_FILE)):
            logger.warning("Checkpoint %s has no %s: the curriculum starts fresh", folder, CHECKPOINT_FILE)
