"""`GymVerseLearner`: oat's multi-turn PPO learner with PERPO advantages and the GymVerse curriculum.

oat's loop (``LearnerBase.run``) collects from the actors, calls ``process_feedback_data`` and then ``learn`` ->
``PPOMultiTurnLearner.learning_step``, whose policy loss uses each transition's ``info["advantages"]``. We
override ``process_feedback_data``:

1. curriculum: every rank all-gathers the episodes' outcomes (each once; void episodes never reach the learner)
   and closes the step on its replica; group rank 0 pushes the state to the actors before the next collection;
2. PERPO through the core's one entry point: each episode's `EpisodeRecord` (transitions are turns, so the
   `EpisodeBatch` has no mask), `gymverse.perpo.batch_stats` on each rank all-reduced over the learner ranks
   (oat's ``strategy.all_reduce``), then `gymverse.perpo.advantages(batch, stats)`: exactly the single-process
   PERPO of all ranks' episodes; without ``--norm_return`` the advantage is the return ``G_t``;
3. oat's subsampling to ``rollout_batch_size_per_device`` transitions (after the advantages, as oat does).

The critic-free PERPO objective replaces oat's GAE: ``--critic_type ppo`` is rejected.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from gymverse.curriculum import CurriculumState
from gymverse.perpo import GroupStats, advantages, batch_stats
from gymverse.perpo.batch import BATCH_GROUP
from gymverse.rollout import EpisodeBatch
from oat.algorithms.ppo_multiturn import PPOMultiTurnLearner
from torch.utils.data import DataLoader, Dataset

from gymverse_oat.args import CLIENT_STATE_KEY, GymVerseArgs
from gymverse_oat.compat import patch_oat_for_torch
from gymverse_oat.episodes import GymVerseTransition, record_of

patch_oat_for_torch()
logger = logging.getLogger(__name__)


class RolloutSlots(Dataset[tuple[str, str, str]]):
    """oat's prompt loop needs a dataset: one empty item per rollout slot (episodes come from the envs)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: int) -> tuple[str, str, str]:
        return "", "", ""


class GymVerseLearner(PPOMultiTurnLearner):
    """PERPO + evolution on oat's multi-turn PPO learner (module docstring)."""

    args: GymVerseArgs

    def _init(self, args: GymVerseArgs, actors: list[Any]) -> None:
        if args.critic_type == "ppo":
            raise ValueError("PERPO is critic-free: use --critic_type grpo or drgrpo (the loss aggregation)")
        self.curriculum = CurriculumState.from_config(args.curriculum_config())
        super()._init(args, actors)
        save_ckpt, load_ckpt = self.strategy.save_ckpt, self.strategy.load_ckpt

        # oat saves and resumes DeepSpeed checkpoints per tag through its strategy; the curriculum rides along as
        # DeepSpeed client_state, so each tag carries its own levels. A checkpoint without it is an error.
        def save_with_curriculum(model: Any, save_dir: str, *a: Any, client_state: Any = None, **kw: Any) -> Any:
            state = {**(client_state or {}), CLIENT_STATE_KEY: self.curriculum_checkpoint()}
            return save_ckpt(model, save_dir, *a, client_state=state, **kw)

        def load_with_curriculum(model: Any, load_dir: str, *a: Any, **kw: Any) -> Any:
            path, states = load_ckpt(model, load_dir, *a, **kw)
            saved = (states or {}).get(CLIENT_STATE_KEY)
            if saved is None:
                raise FileNotFoundError(f"checkpoint {path} has no GymVerse curriculum: resuming would reset levels")
            self.curriculum.load_state_dict(saved)
            self.push_curriculum(with_mixer=True)
            return path, states

        self.strategy.save_ckpt = save_with_curriculum
        self.strategy.load_ckpt = load_with_curriculum

    def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
        """Rollout slots instead of a prompt dataset: ``max_train`` transitions in steps of the rollout batch."""
        per_step = strategy.args.rollout_batch_size_per_device * strategy.world_size
        self.prompts_dataset = RolloutSlots(max(1, math.ceil(strategy.args.max_train / per_step)) * per_step)
        self.prompts_dataloader = strategy.setup_dataloader(
            self.prompts_dataset, strategy.args.rollout_batch_size_per_device, shuffle=False
        )
        self.eval_prompts_dataset = RolloutSlots(0)
        self.eval_prompts_dataloader = DataLoader(self.eval_prompts_dataset, batch_size=1)

    def curriculum_checkpoint(self) -> dict[str, Any]:
        """The curriculum state to checkpoint: this replica plus actor 0's mixer position."""
        state = self.curriculum.state_dict()
        if self.actors and self.strategy.is_group_rank_0():
            state["mixer"] = self.actors[0].curriculum_state()["mixer"]
        return state

    def push_curriculum(self, *, with_mixer: bool = False) -> None:
        """Send this replica's state to every actor (group rank 0 does it; every rank waits for it)."""
        if self.actors and self.strategy.is_group_rank_0():
            state = self.curriculum.state_dict()
            if not with_mixer:
                state["mixer"] = None  # actors keep their own mixer positions
            for fut in [actor.futures.load_curriculum(state) for actor in self.actors]:
                fut.result()
        dist.barrier()

    def update_curriculum(self, batch: EpisodeBatch) -> dict[str, Any]:
        """Record every rank's episode outcomes (each once), close the step, push the new state to the actors."""
        parts: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(parts, batch.outcomes())
        self.curriculum.record(o for part in parts for o in part)
        report = self.curriculum.end_step()
        self.push_curriculum()
        metrics: dict[str, Any] = {"curriculum/episodes": report.episodes}
        metrics.update({f"curriculum/success/{env_id}": rate for env_id, rate in report.success.items()})
        metrics.update({f"curriculum/level/{env_id}": level for env_id, level in report.levels.items()})
        if report.horizon is not None:
            metrics["curriculum/horizon"] = report.horizon
        for change in report.changes:
            logger.info("curriculum: %(env_id)s level %(old_level)s -> %(new_level)s (%(reason)s)", change)
        return metrics

    def all_reduce_sum(self, array: np.ndarray) -> np.ndarray:
        """Sum a float64 array over the learner ranks (oat's strategy: CPU tensors go through the device)."""
        out = self.strategy.all_reduce(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64)), op="sum")
        return np.asarray(out.cpu().numpy(), dtype=np.float64)

    def perpo(self, episodes: list[list[GymVerseTransition]], batch: EpisodeBatch) -> list[GymVerseTransition]:
        """PERPO ``advantages`` / ``returns`` on every turn, then oat's subsampling; returns the kept transitions."""
        args = self.args
        keys = args.env_ids() if args.norm_scope == "env" else [BATCH_GROUP]
        unknown = sorted(set(batch.env_ids) - set(args.env_ids()))
        if unknown:
            raise ValueError(f"episodes of env(s) {unknown} that this run was not configured with ({keys})")
        local = batch_stats(batch, gamma=args.gamma, scope=args.norm_scope).to_array(keys)
        stats = GroupStats.from_array(keys, self.all_reduce_sum(local))
        out = advantages(batch, stats, gamma=args.gamma, scope=args.norm_scope)
        advs = out.turn_advantages if args.norm_return else out.turn_returns  # the reference without --norm_return
        for ep, adv, ret in zip(episodes, advs, out.turn_returns, strict=True):
            for t, a, g in zip(ep, adv, ret, strict=True):
                t.info.update({"advantages": float(a), "returns": float(g), "values": 0.0})
        flat = [t for ep in episodes for t in ep]
        if len(flat) > args.rollout_batch_size_per_device:  # as PPOMultiTurnLearner: subsample after advantages
            keep = np.asarray(np.random.choice(len(flat), args.rollout_batch_size_per_device, replace=False))  # noqa: NPY002
            flat = [flat[int(i)] for i in keep]
        return flat

    def process_feedback_data(self, data_list: list[list[GymVerseTransition]]) -> None:
        """Curriculum step, then PERPO advantages, then oat's buffers (module docstring)."""
        episodes = [list(ep) for ep in data_list if ep]
        batch = EpisodeBatch.of([record_of(ep) for ep in episodes])
        metrics = self.update_curriculum(batch)
        kept = self.perpo(episodes, batch)
        self.actor_info: dict[str, Any] = {**(getattr(self, "actor_info", None) or {}), **metrics}
        self.pi_buffer.extend(kept)
        if self.args.dump_all_buffer:
            self.all_buffer.extend(kept)
        self.query_step += len(kept)
