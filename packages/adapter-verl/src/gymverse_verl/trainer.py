"""`GymVersePPOTrainer` (``trainer.v1.trainer_mode=gymverse_sync``): verl's synchronous v1 trainer plus GymVerse.

It reports ``trainer_mode == "sync"`` to verl's many literal mode checks, so it runs exactly verl's synchronous path.
It hands each row's `EpisodeRecord` to the ``gymverse_perpo`` estimator; starts this run's curriculum actor and
closes one curriculum step after each training step; writes the curriculum into ``global_step_N/`` *before* verl
writes its checkpoint and ``latest_checkpointed_iteration.txt``; on resume loads the resumed folder's file (strict:
resuming ``global_step_2`` restores step 2's levels); stops the actor when ``fit`` ends.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import transfer_queue as tq
from gymverse.curriculum import RayCurriculum, load_checkpoint, save_checkpoint
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from gymverse_verl import TRAINER_MODE
from gymverse_verl.advantage import Rows, episode_rows
from gymverse_verl.dataset import check_split
from gymverse_verl.settings import GymVerseSettings, check_verl_config

logger = logging.getLogger(__name__)
SYNC_MODE = "sync"  # verl's synchronous v1 mode, the one this trainer runs


@register_trainer(TRAINER_MODE)
class GymVersePPOTrainer(PPOTrainerSync):
    """`PPOTrainerSync` with GymVerse episode records, curriculum steps and curriculum checkpoints."""

    @property
    def trainer_mode(self) -> str:
        """Always ``"sync"``: what verl's own mode checks must see for this trainer (see the module docstring)."""
        return SYNC_MODE

    @trainer_mode.setter
    def trainer_mode(self, value: str) -> None:  # verl's __init__ assigns the configured mode name
        if value not in (TRAINER_MODE, SYNC_MODE):
            raise ValueError(f"GymVersePPOTrainer is selected by trainer.v1.trainer_mode={TRAINER_MODE}, got {value!r}")

    def __init__(self, config: Any) -> None:
        check_verl_config(config)
        self.gymverse = GymVerseSettings.from_config(config)
        super().__init__(config)
        if self.gymverse.curriculum.active:  # this run's actor, fresh
            self._curriculum_service = self.gymverse.curriculum_service(fresh=True)

    @property
    def _curriculum(self) -> RayCurriculum:
        if getattr(self, "_curriculum_service", None) is None:
            self._curriculum_service = self.gymverse.curriculum_service()
        return self._curriculum_service

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
        with episode_rows(Rows.read(data["uid"], data["extra_fields"], self.gymverse.eps)):
            return super()._compute_advantage(batch, metrics)

    def step(self, metrics: dict, timing_raw: dict) -> Any:
        """One training step, then one curriculum step from the episodes the agent loops recorded."""
        out = super().step(metrics, timing_raw)
        self.end_curriculum_step(metrics)
        return out

    def end_curriculum_step(self, metrics: dict) -> None:
        """Close the curriculum step and report per-env success and level as ``gymverse/<env_id>/...`` metrics."""
        if not self.gymverse.curriculum.active:
            return
        report = self._curriculum.end_step()
        for change in report.changes:
            logger.info("GymVerse %(env_id)s: level %(old_level)s -> %(new_level)s (%(reason)s)", change)
        metrics.update({f"gymverse/{env_id}/success": rate for env_id, rate in report.success.items()})
        metrics.update({f"gymverse/{env_id}/complexity": level for env_id, level in report.levels.items()})

    def fit(self, agent_loop_manager: Any) -> Any:
        try:
            return super().fit(agent_loop_manager)
        finally:  # the actor is detached and named for this run only: nothing else would end it
            if self.gymverse.curriculum.active:
                self._curriculum.stop()

    def _save_checkpoint(self) -> None:
        if self.gymverse.curriculum.active:  # before verl's files and its "latest" marker (module docstring)
            folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
            save_checkpoint(self._curriculum, folder, global_step=self.global_steps)
        super()._save_checkpoint()

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if self.gymverse.curriculum.active and self.global_steps:  # verl resumed a folder: the same one as verl
            t = self.config.trainer
            latest = find_latest_ckpt_path(os.path.abspath(str(t.default_local_dir)))
            load_checkpoint(
                self._curriculum, os.path.abspath(str(t.resume_from_path if t.resume_mode == "resume_path" else latest))
            )
