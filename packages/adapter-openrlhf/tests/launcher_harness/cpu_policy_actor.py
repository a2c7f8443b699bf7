"""CPU stand-in for OpenRLHF's `PolicyModelActor` (DeepSpeed engine, CUDA, NCCL weight sync), for the launcher test.

It keeps OpenRLHF's actor-side interface (the methods `PPOTrainer`, `RemoteExperienceMaker` and the launcher call
through `RayActorGroup`) and OpenRLHF's own model and loss code: the policy is `openrlhf.models.Actor` (the HF
model OpenRLHF builds, its log-prob forward), the loss is `openrlhf.models.PolicyLoss`, the tokenizer comes from
`openrlhf.utils.get_tokenizer`, and `BaseModelActor` (OpenRLHF's) provides ``execute_batch`` and the distributed
environment variables. What it runs instead of DeepSpeed: a plain ``torch.optim.AdamW`` step per experience
(micro-batch) it was handed, at ``--actor.adam.lr``.

What it does NOT run: `ActorPPOTrainer` (its epochs, shuffled micro-batches, gradient accumulation, clipping,
LR schedule, KL/entropy/aux losses), `NaiveReplayBuffer`, DeepSpeed's engine, ZeRO and checkpoint format (a
checkpoint here is ``<ckpt.path>/_actor/<tag>/mp_rank_00_model_states.pt`` with the model, optimizer and client
states, plus DeepSpeed's ``latest`` file and OpenRLHF's ``metric.json``; no rotation), and the NCCL/CUDA-IPC weight
broadcast (``broadcast_to_vllm`` calls each engine's real `RolloutRayActor.update_weight` per parameter, which the
scripted vLLM stand-in records; a scripted policy has no weights to load).
"""

from __future__ import annotations

import os
from typing import Any

import ray
import torch
from openrlhf.models import Actor, PolicyLoss
from openrlhf.trainer.ray.launcher import BaseModelActor
from openrlhf.utils import get_tokenizer

MODEL_FILE = "mp_rank_00_model_states.pt"  # DeepSpeed's name for rank 0's model states


@ray.remote(num_gpus=1)
class CpuPolicyModelActor(BaseModelActor):
    """OpenRLHF's policy actor interface on CPU (see the module docstring)."""

    def init_model_from_pretrained(
        self, strategy: Any, pretrain: str, max_steps: int | None = None, vllm_engines: Any = None
    ) -> None:
        """Load the policy with OpenRLHF's `Actor`; restore ``<ckpt.path>/_actor`` with ``--ckpt.load_enable``."""
        self.strategy = strategy  # no setup_distributed: no process group on one CPU worker
        args = strategy.args
        self.vllm_engines = vllm_engines
        self.actor = Actor(
            pretrain,
            attn_implementation=args.ds.attn_implementation,
            param_dtype=args.ds.param_dtype,
            packing_samples=args.ds.packing_samples,
            temperature=args.rollout.temperature,
        )
        self.tokenizer = get_tokenizer(pretrain, self.actor.model, "left", strategy)
        self.optimizer = torch.optim.AdamW(
            self.actor.parameters(), lr=args.actor.adam.lr, betas=tuple(args.actor.adam.betas), eps=args.actor.adam.eps
        )
        self.loss_fn = PolicyLoss(
            clip_eps_low=args.actor.eps_clip_low_high[0],
            clip_eps_high=args.actor.eps_clip_low_high[1],
            token_level_loss=args.actor.loss_agg_mode == "token-mean",
            policy_loss_type=args.actor.policy_loss_type,
        )
        self.buffer: list[Any] = []
        self.checkpoint_states: dict[str, Any] = {}
        load_dir = os.path.join(args.ckpt.path, "_actor")
        if args.ckpt.load_enable and os.path.exists(load_dir):
            self.checkpoint_states = self.load_checkpoint(load_dir)

    def forward(
        self,
        sequences: torch.Tensor,
        action_mask: torch.Tensor,
        attention_mask: torch.Tensor,
        packed_seq_lens: Any = None,
        mm_train_inputs_list: Any = None,
    ) -> torch.Tensor:
        """Action log-probs of the current policy (what `RemoteExperienceMaker.make_experience` asks for)."""
        self.actor.eval()
        with torch.no_grad():
            out = self.actor(sequences, action_mask, attention_mask)
        self.actor.train()
        return out

    def empty_cache(self) -> None:
        """No CUDA cache on CPU."""

    def append(self, experience: Any) -> None:
        """Keep an experience for the next `fit`."""
        self.buffer.append(experience)

    def fit(self, kl_ctl: float = 0) -> dict[str, float]:
        """One AdamW step on OpenRLHF's `PolicyLoss` per buffered experience; returns OpenRLHF's status keys."""
        self.actor.train()
        losses = []
        for exp in self.buffer:
            log_probs = self.actor(exp.sequences, exp.action_mask, exp.attention_mask)
            loss, _clip, _kl, _vllm_kl, _filtered = self.loss_fn(
                log_probs, exp.action_log_probs, exp.advantages, action_mask=exp.action_mask
            )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss.detach()))
        self.buffer.clear()
        return {"policy_loss": sum(losses) / max(1, len(losses)), "actor_lr": self.optimizer.param_groups[0]["lr"]}

    def broadcast_to_vllm(self) -> None:
        """Announce every parameter to each engine through OpenRLHF's `RolloutRayActor.update_weight`."""
        params = list(self.actor.model.named_parameters())
        for engine in self.vllm_engines or []:
            ray.get(
                [
                    engine.update_weight.remote(name, dtype=p.dtype, shape=p.shape, empty_cache=i == len(params) - 1)
                    for i, (name, p) in enumerate(params)
                ]
            )

    def get_checkpoint_states(self) -> dict[str, Any]:
        """The client states of the checkpoint loaded at start (empty when none)."""
        return self.checkpoint_states

    def save_checkpoint(
        self, tag: str, client_states: Any = None, metric_value: Any = None, metric_key: Any = None
    ) -> None:
        """Model, optimizer and client states under ``_actor/<tag>``, and ``_actor/latest`` naming the tag."""
        save_dir = os.path.join(self.strategy.args.ckpt.path, "_actor")
        os.makedirs(os.path.join(save_dir, tag), exist_ok=True)
        state = {
            "module": self.actor.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "client_state": dict(client_states or {}),
        }
        torch.save(state, os.path.join(save_dir, tag, MODEL_FILE))
        with open(os.path.join(save_dir, "latest"), "w") as fh:
            fh.write(tag)
        self.strategy._write_ckpt_metric(os.path.join(save_dir, tag), metric_value, metric_key=metric_key)

    def load_checkpoint(self, load_dir: str) -> dict[str, Any]:
        """Restore the ``latest`` checkpoint's model and optimizer; returns its client states."""
        with open(os.path.join(load_dir, "latest")) as fh:
            tag = fh.read().strip()
        state = torch.load(os.path.join(load_dir, tag, MODEL_FILE), weights_only=False)
        self.actor.model.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])
        return dict(state["client_state"])

    def save_model(self) -> None:
        """The final HF model and tokenizer in ``--ckpt.output_dir`` (what OpenRLHF's rank 0 writes)."""
        out = self.strategy.args.ckpt.output_dir
        self.actor.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
