"""`BatchedSampler`: the core `Generate` callable backed by one batched, KV-cached ``model.generate`` call.

`run_episode` asks for one reply at a time; `RolloutCollector` runs all episodes of a step concurrently. The
sampler parks each request until every concurrent episode has asked (the event loop goes quiet), then answers
them all with one left-padded ``generate`` over the batch (chunks of ``max_batch``), so a step costs one batched
decode per turn instead of one per episode. Sampling draws from torch's global RNG, which the trainer seeds per
step (resume-safe). Log-probs are the sampling distribution's (``log_softmax(logits / temperature)``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gymverse.rollout import Generation

# the loop is quiet (every episode is parked here) after this many yields without a new request
_QUIET_YIELDS = 3


@dataclass
class _Request:
    prompt: list[int]
    cap: int
    future: asyncio.Future[Generation] = field(repr=False)


@dataclass
class SamplerStats:
    """Counters since the last `SamplerStats.reset`."""

    tokens: int = 0
    calls: int = 0
    seconds: float = 0.0

    def reset(self) -> None:
        """Zero the counters."""
        self.tokens, self.calls, self.seconds = 0, 0, 0.0


class BatchedSampler:
    """Async ``generate(prompt_ids, max_tokens) -> Generation`` over a Hugging Face causal LM (module docstring)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        stop_ids: Iterable[int],
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_batch: int = 64,
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"RL sampling needs temperature > 0, got {temperature}")
        self.model, self.tokenizer = model, tokenizer
        self.stop_ids = sorted({int(i) for i in stop_ids})
        if not self.stop_ids:
            raise ValueError("no stop token: the tokenizer has no eos_token_id and the template no end-of-turn")
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else self.stop_ids[0]
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_p, self.max_batch = temperature, top_p, max_batch
        self.stats = SamplerStats()
        self._pending: list[_Request] = []
        self._flusher: asyncio.Task[None] | None = None

    async def __call__(self, prompt_ids: list[int], max_tokens: int | None) -> Generation:
        """Queue one request; answered with the rest of the batch once the event loop is quiet."""
        cap = self.max_new_tokens if max_tokens is None else min(self.max_new_tokens, int(max_tokens))
        fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._pending.append(_Request(list(prompt_ids), cap, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush_when_quiet())
        return await fut

    async def _flush_when_quiet(self) -> None:
        seen, quiet = -1, 0
        while quiet < _QUIET_YIELDS:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)
        batch, self._pending = self._pending, []
        try:
            for i in range(0, len(batch), self.max_batch):
                chunk = batch[i : i + self.max_batch]
                for req, gen in zip(chunk, self.generate_batch([r.prompt for r in chunk], [r.cap for r in chunk])):
                    req.future.set_result(gen)
        except BaseException as err:  # a failed generation fails its episodes (never silently trained on)
            for req in batch:
                if not req.future.done():
                    req.future.set_exception(err)
            if not isinstance(err, Exception):
                raise

    def generate_batch(self, prompts: list[list[int]], caps: list[int]) -> list[Generation]:
        """Sample one reply per prompt (left-padded batch, KV cache); each reply ends at a stop id or its cap."""
        import torch

        started = time.perf_counter()
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for b, p in enumerate(prompts):
            ids[b, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[b, width - len(p) :] = 1
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=ids.to(device),
                    attention_mask=attn.to(device),
                    do_sample=True,
                    temperature=self.temperature,
                    top_p=self.top_p,
                    top_k=0,
                    max_new_tokens=max(caps),
                    eos_token_id=self.stop_ids,
                    pad_token_id=self.pad_id,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
        finally:
            self.model.train(was_training)
        new = out.sequences[:, width:]
        # the picked tokens' log-probs are taken on the model's device: only [B, steps] floats cross to the host,
        # not the [B, steps, vocab] logits (1.2 GB per 64x32 batch at a 151k vocabulary)
        logits = torch.stack(out.logits, dim=1).float() / self.temperature
        picked = new[:, : logits.shape[1], None]
        token_lp = (logits.gather(-1, picked).squeeze(-1) - torch.logsumexp(logits, dim=-1)).cpu()
        new = new.cpu()
        stops = set(self.stop_ids)
        result = []
        for b, cap in enumerate(caps):
            row = new[b].tolist()[:cap]
            end = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            result.append(Generation(row[:end], token_lp[b, :end].tolist()))
            self.stats.tokens += end
        self.stats.calls += 1
        self.stats.seconds += time.perf_counter() - started
        return result
