"""Stand-in for vLLM's offline engine (`vllm.LLM`), which needs a GPU: generation by a small Hugging Face model on CPU.

It returns exactly what vLLM's ``LLM.generate`` returns (``RequestOutput`` with ``prompt_token_ids`` and one
``CompletionOutput`` per sample: ``text``, ``token_ids``, per-token ``logprobs`` dicts of ``Logprob`` and
``finish_reason`` "stop"/"length"; log-probs only when asked; a prompt past ``max_model_len`` fails the whole
call with vLLM's ValueError), and serves ``collective_rpc`` to the worker extension class oat names
(``oat.utils.distributed.WorkerWrap``): its real ``init_process_group`` joins the learner's weight-sync group over
gloo; only ``update_weight``'s CUDA buffer is replaced by a CPU one. Like a vLLM engine, the stand-in runs its own
one-process torch world.

A policy may be scripted instead of sampled: a file ``scripted_policy.txt`` in the model directory names one of
`POLICIES` (text in, text out); its answer is tokenized, closed with EOS, cut at ``max_tokens``, and its
log-probabilities are the model's own (teacher-forced), so the learner sees real behaviour log-probs.
"""

from __future__ import annotations

import importlib
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

__version__ = "0.8.4"


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    logprobs: int | None = None
    stop: list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


def _guess_binary(prompt: str) -> str:
    """Binary search on GuessTheNumber from the transcript in the prompt (always solves it at easy levels)."""
    m = re.search(r"between 1 and (\d+)", prompt)
    lo, hi = 1, int(m.group(1)) if m else 10
    for guess, word in re.findall(r"(\d+) is too (low|high)", prompt):
        if word == "low":
            lo = max(lo, int(guess) + 1)
        else:
            hi = min(hi, int(guess) - 1)
    return "I halve the range. \\boxed{" + str((lo + hi) // 2) + "}"


def _guess_wrong(prompt: str) -> str:
    """Never succeeds: an out-of-range guess every turn."""
    del prompt
    return "\\boxed{0}"


POLICIES: dict[str, Callable[[str], str]] = {"guess_binary": _guess_binary, "guess_wrong": _guess_wrong}


class _HFRunner:
    """The ``model_runner.model`` vLLM's worker exposes: ``load_weights`` by Hugging Face parameter name."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.loaded: list[str] = []

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        params = dict(self.model.named_parameters())
        for name, w in weights:
            params[name].data.copy_(w)
            self.loaded.append(name)


class _CPUWorker:
    """A vLLM worker: `model_runner`, `model_config`; the extension class (WorkerWrap) is mixed in after it."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model_runner = SimpleNamespace(model=_HFRunner(model))
        self.model_config = SimpleNamespace(dtype=next(model.parameters()).dtype, enforce_eager=True)

    def update_weight(
        self, name: str, dtype: str, shape: Any, cuda_ipc_handles: Any = None, empty_cache: bool = False
    ) -> None:
        """WorkerWrap.update_weight with the received buffer on CPU instead of CUDA."""
        from oat.utils.distributed import torch_type_codec

        weight = torch.empty(tuple(shape), dtype=torch_type_codec(dtype))
        torch.distributed.broadcast(weight, 0, group=self._model_update_group)  # type: ignore[attr-defined]
        self.model_runner.model.load_weights(weights=[(name, weight)])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LLM:
    """`vllm.LLM` on CPU (see the module docstring)."""

    def __init__(self, model: str, seed: int = 0, worker_extension_cls: str | None = None, **engine_args: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.engine_args = dict(engine_args, model=model, seed=seed)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32).eval()
        self.generator = torch.Generator().manual_seed(int(seed) % 2**63)
        policy_file = os.path.join(model, "scripted_policy.txt")
        self.policy = None
        if os.path.exists(policy_file):
            with open(policy_file) as fh:
                self.policy = POLICIES[fh.read().strip()]
        if not torch.distributed.is_initialized():  # a vLLM engine runs its own torch world
            torch.distributed.init_process_group(
                "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", world_size=1, rank=0
            )
        bases: tuple[type, ...] = (_CPUWorker,)
        if worker_extension_cls:
            mod, _, name = worker_extension_cls.rpartition(".")
            bases += (getattr(importlib.import_module(mod), name),)
        self.worker = type("Worker", bases, {})(self.model)
        self.llm_engine = SimpleNamespace(reset_prefix_cache=lambda: True)
        self.sleeping = False

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def collective_rpc(
        self, method: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> list[Any]:
        """Call `method` on every worker (one here) and return their results."""
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def sleep(self, level: int = 1) -> None:
        self.sleeping = True

    def wake_up(self) -> None:
        self.sleeping = False

    @torch.no_grad()
    def _logprobs(self, prompt_ids: list[int], response_ids: list[int], temperature: float) -> list[float]:
        ids = torch.tensor([prompt_ids + response_ids])
        logits = self.model(ids).logits[0, len(prompt_ids) - 1 : -1].float() / max(temperature, 1e-5)
        logp = torch.log_softmax(logits, -1)
        return logp.gather(1, torch.tensor(response_ids)[:, None])[:, 0].tolist()

    def _stops(self, params: SamplingParams) -> set[int]:
        return {self.tokenizer.eos_token_id, *(params.stop_token_ids or [])}

    @torch.no_grad()
    def _sample(self, prompt_ids: list[int], params: SamplingParams) -> list[int]:
        out: list[int] = []
        ids = list(prompt_ids)
        stops = self._stops(params)
        for _ in range(params.max_tokens or 16):
            logits = self.model(torch.tensor([ids])).logits[0, -1].float() / max(params.temperature, 1e-5)
            tok = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator))
            out.append(tok)
            ids.append(tok)
            if tok in stops:
                break
        return out

    def generate(
        self,
        prompts: list[str] | None = None,
        sampling_params: SamplingParams | list[SamplingParams] | None = None,
        prompt_token_ids: list[list[int]] | None = None,
        lora_request: Any = None,
        use_tqdm: bool = True,
    ) -> list[RequestOutput]:
        """Continue each prompt (text or token ids) once per ``sampling_params.n``."""
        if prompt_token_ids is None:
            prompt_token_ids = [self.tokenizer(p).input_ids for p in prompts or []]
        limit = self.engine_args.get("max_model_len")
        for pids in prompt_token_ids:  # vLLM 0.8.4 refuses the whole call, as `LLM._validate_and_add_requests` does
            if limit is not None and len(pids) >= limit:
                raise ValueError(
                    f"The decoder prompt (length {len(pids)}) is longer than the maximum model length of {limit}. "
                    "Make sure that `max_model_len` is no smaller than the number of text tokens."
                )
        results = []
        per_prompt = sampling_params if isinstance(sampling_params, list) else None
        for i, pids in enumerate(prompt_token_ids):
            params = per_prompt[i] if per_prompt is not None else (sampling_params or SamplingParams())
            assert isinstance(params, SamplingParams)
            pids = list(pids)
            completions = []
            for k in range(params.n):
                if self.policy is not None:
                    prompt_text = str(self.tokenizer.decode(pids))
                    ids = self.tokenizer(self.policy(prompt_text), add_special_tokens=False).input_ids
                    ids.append(self.tokenizer.eos_token_id)
                else:
                    ids = self._sample(pids, params)
                limit = params.max_tokens or len(ids)
                finish = "stop" if len(ids) <= limit else "length"
                ids = ids[:limit]
                lps = self._logprobs(pids, ids, params.temperature)
                text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
                per_token = [{t: Logprob(lp, 1)} for t, lp in zip(ids, lps)] if params.logprobs is not None else None
                completions.append(CompletionOutput(k, text, ids, float(sum(lps)), per_token, finish))
            results.append(RequestOutput(str(i), str(prompts[i]) if prompts else None, pids, completions))
        return results
