"""The peers `gymverse train` is measured against, on the same model and the same work as one of its steps.

* Rollout: every batch the trainer's sampler answered in the step (the same prompts, the same token caps), replayed
  through a plain ``model.generate`` (sampling, no log-prob output, no env, no rendering).
* Update: the step's training samples (same ids, masks and advantages), through a plain loop of forward,
  ``-(advantage * log-prob)`` loss, backward, gradient clipping and an AdamW step in the same micro-batches.

`Recorder` captures both from a running `Trainer`; `rollout_peer` / `update_peer` time the peers. The ratios are
GymVerse's time over the peer's for the same tokens (1.0 = no overhead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Recorder:
    """What the last step's sampler generated and what its update trained on."""

    batches: list[tuple[list[list[int]], list[int]]] = field(default_factory=list)
    samples: list[Any] = field(default_factory=list)

    def attach(self, trainer: Any) -> None:
        """Wrap the trainer's sampler and update so each step's work is recorded (the work itself is unchanged)."""
        import gymverse_train.trainer as trainer_module

        sampler = trainer.sampler
        generate_batch = sampler.generate_batch
        update = trainer_module.policy_update

        def recording_generate(prompts: list[list[int]], caps: list[int]) -> Any:
            self.batches.append(([list(p) for p in prompts], list(caps)))
            return generate_batch(prompts, caps)

        def recording_update(model: Any, optimizer: Any, samples: Any, config: Any) -> Any:
            self.samples = list(samples)
            return update(model, optimizer, samples, config)

        sampler.generate_batch = recording_generate
        trainer_module.policy_update = recording_update

    def new_step(self) -> None:
        """Forget the previous step."""
        self.batches, self.samples = [], []


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def rollout_peer(model: Any, sampler: Any, batches: list[tuple[list[list[int]], list[int]]]) -> dict[str, float]:
    """Plain ``generate`` over the recorded batches: seconds and generated tokens (up to each row's stop or cap)."""
    import torch

    device = next(model.parameters()).device
    stops = set(sampler.stop_ids)
    tokens, seconds = 0, 0.0
    model.eval()
    for prompts, caps in batches:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), sampler.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, p in enumerate(prompts):
            ids[b, width - len(p) :] = torch.tensor(p)
            attn[b, width - len(p) :] = 1
        _sync(str(device))
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device), do_sample=True,
                                 temperature=sampler.temperature, top_p=sampler.top_p, top_k=0,
                                 max_new_tokens=max(caps), eos_token_id=sampler.stop_ids,
                                 pad_token_id=sampler.pad_id)  # fmt: skip
        _sync(str(device))
        seconds += time.perf_counter() - t0
        for b, row in enumerate(out[:, width:].tolist()):
            row = row[: caps[b]]
            tokens += next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
    model.train()
    return {"seconds": seconds, "tokens": float(tokens), "tokens_per_s": tokens / max(seconds, 1e-9)}


def update_peer(model: Any, samples: list[Any], micro_batch: int, lr: float, temperature: float) -> dict[str, float]:
    """Plain forward / ``-(A * log π)`` / backward / clip / AdamW step on the recorded samples, in micro-batches."""
    import torch

    device = next(model.parameters()).device
    samples = [s for s in samples if any(s.mask)]
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    total = float(sum(sum(s.mask) for s in samples))
    model.train()
    _sync(str(device))
    t0 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for i in range(0, len(samples), micro_batch):
        chunk = samples[i : i + micro_batch]
        width = max(len(s.ids) for s in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        attn, adv, mask = torch.zeros_like(ids), torch.zeros((len(chunk), width)), torch.zeros((len(chunk), width))
        for b, s in enumerate(chunk):
            n = len(s.ids)
            ids[b, :n], attn[b, :n] = torch.tensor(s.ids), 1
            adv[b, :n], mask[b, :n] = torch.tensor(s.advantages), torch.tensor(s.mask, dtype=torch.float32)
        ids, attn, adv, mask = (x.to(device) for x in (ids, attn, adv, mask))
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        loss = -(adv[:, 1:] * logp * mask[:, 1:]).sum() / total
        loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    _sync(str(device))
    return {"seconds": time.perf_counter() - t0, "train_tokens": total}


__all__ = ["Recorder", "rollout_peer", "update_peer"]
