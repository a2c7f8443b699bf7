"""Stand-in for the `vllm` package (GPU-only): the surface OpenRLHF 0.11.2 uses, with a scripted engine.

`AsyncLLMEngine` continues a token prompt the way a policy playing ``game:GuessTheNumber`` would: it decodes the
conversation, reads the range from the latest task statement and narrows it with every "too low"/"too high"
feedback, and answers ``\\boxed{mid}``. Every second episode (first reply of a conversation) it first answers
without a box, a format error (tests may set ``policy`` to another conversation -> reply function). Replies are
tokenized, closed with EOS and cut to ``max_tokens`` and to ``max_model_len`` as vLLM does.

It fails the way vLLM 0.29 does: log-probs only when ``SamplingParams.logprobs`` is set (a ``{token_id: Logprob}``
dict per generated token, the sampled token among them); a prompt longer than ``max_model_len`` raises
`vllm.exceptions.VLLMValidationError` (a ValueError) from ``generate``; and faults queued in ``faults`` happen to
the next requests: ``"abort"`` (a finished output with no token and ``finish_reason="abort"``, what an aborted
request returns), ``"engine_error"`` (`vllm.v1.engine.exceptions.EngineGenerateError`) and ``"dead"``
(`EngineDeadError`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

__version__ = "0.29.0"


@dataclass
class SamplingParams:
    """The fields OpenRLHF sets."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = 16
    min_tokens: int = 0
    skip_special_tokens: bool = True
    logprobs: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Logprob:
    """vLLM's per-token log-prob entry."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    """vLLM's per-completion output."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: Any
    finish_reason: str


@dataclass
class RequestOutput:
    """vLLM's per-request output."""

    request_id: str
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


class AsyncEngineArgs:
    """Keeps the engine arguments OpenRLHF passes (``model`` is the tokenizer's path here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.model: str = kwargs["model"]
        self.kwargs = kwargs


class _OutputProcessor:
    def __init__(self) -> None:
        self.unfinished = 0

    def get_num_unfinished_requests(self) -> int:
        return self.unfinished


#: ChatML's assistant turn header (the launcher test's tokenizer uses ChatML).
ASSISTANT_TURN = "<|im_start|>assistant"
_RANGE = re.compile(r"integer between 1 and (\d+)")
_FEEDBACK = re.compile(r"(\d+) is too (low|high)")


def guess(conversation: str) -> int:
    """Binary search over the conversation's latest range and the feedback after it."""
    starts = list(_RANGE.finditer(conversation))
    if not starts:
        return 1
    lo, hi = 1, int(starts[-1].group(1))
    for m in _FEEDBACK.finditer(conversation, starts[-1].end()):
        if m.group(2) == "low":
            lo = max(lo, int(m.group(1)) + 1)
        else:
            hi = min(hi, int(m.group(1)) - 1)
    return (lo + hi) // 2


class AsyncLLMEngine:
    """The scripted engine (see the module docstring); records weight updates and request counts."""

    def __init__(self, args: AsyncEngineArgs) -> None:
        from transformers import AutoTokenizer

        self.tokenizer: Any = AutoTokenizer.from_pretrained(args.model)
        self.max_model_len: int | None = args.kwargs.get("max_model_len")
        self.output_processor = _OutputProcessor()
        self.episodes = 0
        self.rpc_calls: list[str] = []
        self.faults: list[str] = []
        self.policy: Callable[[str], str] | None = None

    @classmethod
    def from_engine_args(cls, engine_args: AsyncEngineArgs) -> AsyncLLMEngine:
        """vLLM's constructor."""
        return cls(engine_args)

    async def is_sleeping(self) -> bool:
        """Never asleep (no sleep mode on CPU)."""
        return False

    async def generate(self, prompt: dict[str, Any], sampling_params: Any, request_id: str) -> AsyncIterator[Any]:
        """One reply to the token prompt, as a single final `RequestOutput` (or vLLM's failures, see above)."""
        from vllm.exceptions import VLLMValidationError
        from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

        ids = list(prompt["prompt_token_ids"])
        fault = self.faults.pop(0) if self.faults else None
        if fault == "dead":
            raise EngineDeadError("EngineCore encountered an issue. See stack trace (above) for the root cause.")
        if fault == "engine_error":
            raise EngineGenerateError()
        if self.max_model_len is not None and len(ids) > self.max_model_len:
            raise VLLMValidationError(
                f"The decoder prompt (length {len(ids)}) is longer than the maximum model length of "
                f"{self.max_model_len}. Make sure that `max_model_len` is no smaller than the number of text tokens."
            )
        if fault == "abort":
            aborted = CompletionOutput(0, "", [], None, None if sampling_params.logprobs is None else [], "abort")
            yield RequestOutput(request_id, ids, [aborted])
            return
        conversation = self.tokenizer.decode(ids)
        first = conversation.count(ASSISTANT_TURN) <= 1  # only the generation prompt: the episode's first reply
        if first:
            self.episodes += 1
        if self.policy is not None:
            text = self.policy(conversation)
        else:
            text = "I think it is seven." if first and self.episodes % 2 == 0 else rf"\boxed{{{guess(conversation)}}}"
        out = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        reason = "stop"
        limits = [sampling_params.max_tokens]
        if self.max_model_len is not None:
            limits.append(self.max_model_len - len(ids))
        limit = min((x for x in limits if x is not None), default=None)
        if limit is not None and len(out) > limit:
            out, reason = out[:limit], "length"
        logprobs = None
        if sampling_params.logprobs is not None:  # the sampled token, and one runner-up
            logprobs = [{t: Logprob(-0.25 - 0.01 * i, 1), t + 1: Logprob(-3.0, 2)} for i, t in enumerate(out)]
        completion = CompletionOutput(0, self.tokenizer.decode(out), out, None, logprobs, reason)
        self.output_processor.unfinished += 1
        try:
            yield RequestOutput(request_id, ids, [completion])
        finally:
            self.output_processor.unfinished -= 1

    async def collective_rpc(self, method: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Weight sync calls reach the (single) worker: recorded, nothing to load into a scripted policy."""
        self.rpc_calls.append(method)
        return [None]

    async def reset_prefix_cache(self) -> None:
        """No cache."""

    async def sleep(self, level: int = 1) -> None:
        """No sleep mode."""

    async def wake_up(self, tags: list[str] | None = None) -> None:
        """No sleep mode."""

    async def pause_generation(self, mode: str = "keep") -> None:
        """Nothing in flight between calls."""

    async def resume_generation(self) -> None:
        """Nothing paused."""
