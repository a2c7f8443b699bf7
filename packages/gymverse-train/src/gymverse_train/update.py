"""The policy-gradient update: oat-style clipped importance ratio with β = 0 (no KL, no critic).

Per model token with advantage ``A`` and ratio ``ρ = π_θ(a|s) / π_old(a|s)``::

    loss = -mean_tokens( min(ρ A, clip(ρ, 1-ε, 1+ε) A) )

over every model token of the batch (env and prompt tokens are masked out). ``π_old`` is the policy's own
teacher-forced log-prob before the update, so with one epoch over one minibatch ``ρ = 1`` and this is exactly
REINFORCE with the given advantages; more epochs or minibatches make the clip matter, as in PPO.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Sample:
    """One training sequence: ``ids`` (prompt + response), per-token advantages and loss mask aligned with it."""

    ids: list[int]
    advantages: list[float]
    mask: list[int]


@dataclass
class UpdateConfig:
    """Optimisation settings of one step."""

    clip: float = 0.2
    epochs: int = 1
    minibatches: int = 1
    micro_batch: int = 8
    max_grad_norm: float = 1.0
    temperature: float = 1.0  # the policy is the sampler's tempered distribution

    @property
    def on_policy(self) -> bool:
        """One optimizer step per batch: ``ρ = 1`` exactly (REINFORCE), no separate old-log-prob pass needed."""
        return self.epochs == 1 and self.minibatches == 1


def _pad(samples: Sequence[Sample]) -> tuple[Any, Any, Any, Any]:
    import torch

    width = max(len(s.ids) for s in samples)
    ids = torch.zeros((len(samples), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    adv = torch.zeros((len(samples), width), dtype=torch.float32)
    mask = torch.zeros_like(adv)
    for b, s in enumerate(samples):
        n = len(s.ids)
        ids[b, :n] = torch.tensor(s.ids)
        attn[b, :n] = 1
        adv[b, :n] = torch.tensor(s.advantages, dtype=torch.float32)
        mask[b, :n] = torch.tensor(s.mask, dtype=torch.float32)
    return ids, attn, adv, mask


def token_logprobs(model: Any, ids: Any, attn: Any, temperature: float = 1.0) -> Any:
    """``log π(ids[t] | ids[:t])`` for t >= 1 at the sampling temperature, aligned with ``ids`` (position 0: 0)."""
    import torch

    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature
    # gather minus logsumexp: the same as log_softmax then gather, without a second [B, T, vocab] tensor
    lp = logits.gather(-1, ids[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return torch.nn.functional.pad(lp, (1, 0))


def sample_logprobs(
    model: Any, samples: Sequence[Sample], micro_batch: int = 8, temperature: float = 1.0
) -> list[np.ndarray]:
    """Teacher-forced log-probs of each sample's tokens under `model` (no gradient)."""
    import torch

    device = next(model.parameters()).device
    out: list[np.ndarray] = []
    with torch.no_grad():
        for i in range(0, len(samples), micro_batch):
            chunk = samples[i : i + micro_batch]
            ids, attn, _, _ = _pad(chunk)
            lp = token_logprobs(model, ids.to(device), attn.to(device), temperature).cpu().numpy()
            out += [lp[b, : len(s.ids)] for b, s in enumerate(chunk)]
    return out


def policy_update(model: Any, optimizer: Any, samples: Sequence[Sample], config: UpdateConfig) -> dict[str, float]:
    """Clipped policy-gradient update on `samples`; returns loss, grad norm, clip fraction and approx. KL."""
    import torch

    samples = [s for s in samples if any(s.mask)]
    if not samples:
        return {"loss": 0.0, "grad_norm": 0.0, "clip_frac": 0.0, "approx_kl": 0.0, "train_tokens": 0}
    device = next(model.parameters()).device
    model.train()
    old = None if config.on_policy else sample_logprobs(model, samples, config.micro_batch, config.temperature)
    order = list(range(len(samples)))
    mb_size = math.ceil(len(samples) / max(1, config.minibatches))
    params = [p for p in model.parameters() if p.requires_grad]
    trained = [sum(s.mask) for s in samples]  # model tokens per sample: the loss's denominator and the metrics'
    # metrics stay on the device until the end: a host read per micro-batch would stall the GPU's queue
    losses, norms, clipped, kls, counted = [], [], [], [], 0.0
    for _ in range(config.epochs):
        for start in range(0, len(order), mb_size):
            mb = order[start : start + mb_size]
            total = float(sum(trained[i] for i in mb))
            optimizer.zero_grad(set_to_none=True)
            mb_loss = torch.zeros((), device=device)
            for m in range(0, len(mb), config.micro_batch):
                idx = mb[m : m + config.micro_batch]
                ids, attn, adv, mask = _pad([samples[i] for i in idx])
                ids, attn, adv, mask = (x.to(device) for x in (ids, attn, adv, mask))
                new_lp = token_logprobs(model, ids, attn, config.temperature)
                if old is None:
                    old_lp = new_lp.detach()
                else:
                    old_lp = torch.zeros_like(new_lp)
                    for b, i in enumerate(idx):
                        old_lp[b, : len(old[i])] = torch.from_numpy(old[i]).to(device)
                ratio = torch.exp(new_lp - old_lp)
                surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - config.clip, 1 + config.clip) * adv)
                loss = -(surr * mask).sum() / total
                loss.backward()
                with torch.no_grad():
                    mb_loss += loss.detach()
                    clipped.append((((ratio - 1).abs() > config.clip).float() * mask).sum())
                    kls.append(((old_lp - new_lp) * mask).sum() / total)
                counted += sum(trained[i] for i in idx)
            norms.append(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm).detach())
            optimizer.step()
            losses.append(mb_loss)
    optimizer.zero_grad(set_to_none=True)
    return {
        "loss": float(torch.stack(losses).mean()),
        "grad_norm": float(torch.stack(norms).float().mean()),
        "clip_frac": float(torch.stack(clipped).sum()) / max(counted, 1.0),
        "approx_kl": float(torch.stack(kls).sum()) / max(1, config.epochs),
        "train_tokens": int(sum(trained)),
    }
