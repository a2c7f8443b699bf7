"""The vLLM stand-in against the real OpenRLHF code that consumes vLLM's outputs.

OpenRLHF's `RolloutRayActor.generate` drives the stand-in's `AsyncLLMEngine.generate` and hands its final output to
the executors; OpenRLHF's own `SingleTurnAgentExecutor` reads its token ids, finish reason and log-probs. The
stand-in must give them what vLLM gives: log-probs only when asked, in vLLM's ``{token_id: Logprob}`` form; an
aborted request's empty output; a context-length `ValueError`; `EngineGenerateError` / `EngineDeadError`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import vllm
from openrlhf.utils.agent import SingleTurnAgentExecutor

PROMPT = "Guess an integer between 1 and 8."


def single_turn(actor: Any, tokenizer: Any, params: Any) -> dict[str, Any]:
    executor = SingleTurnAgentExecutor()
    return asyncio.run(executor.execute(PROMPT, "label", params, 4096, tokenizer, actor))


@pytest.mark.parametrize("logprobs", [None, 1])
def test_openrlhf_reads_logprobs_only_when_asked(rollout: Any, tokenizer: Any, logprobs: Any) -> None:
    params = vllm.SamplingParams(max_tokens=None, logprobs=logprobs)
    out = single_turn(rollout(), tokenizer, params)
    ((start, end),) = out["action_ranges"]
    assert end > start and out["observation_tokens"][end - 1] == tokenizer.eos_token_id
    if logprobs is None:
        assert out["rollout_log_probs"] is None
    else:  # OpenRLHF picks each sampled token's entry out of vLLM's per-token dicts
        assert out["rollout_log_probs"][start:end] == pytest.approx([-0.25 - 0.01 * i for i in range(end - start)])


def test_aborted_request_is_a_finished_output_with_no_token(rollout: Any, tokenizer: Any) -> None:
    actor = rollout()
    actor.llm.faults = ["abort"]
    final = asyncio.run(actor.generate(tokenizer(PROMPT)["input_ids"], vllm.SamplingParams(max_tokens=8)))
    assert final.finished and final.outputs[0].finish_reason == "abort" and final.outputs[0].token_ids == []
    actor.llm.faults = ["abort"]
    out = single_turn(actor, tokenizer, vllm.SamplingParams(max_tokens=None))
    ((start, end),) = out["action_ranges"]
    assert start == end  # what OpenRLHF itself makes of it: an empty reply


def test_context_length_and_engine_errors_raise_through_openrlhf(rollout: Any, tokenizer: Any) -> None:
    from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

    ids = tokenizer(PROMPT)["input_ids"]
    with pytest.raises(ValueError, match=f"The decoder prompt \\(length {len(ids)}\\) is longer than the maximum"):
        asyncio.run(rollout(max_model_len=len(ids) - 1).generate(ids, vllm.SamplingParams(max_tokens=4)))
    for fault, error in (("engine_error", EngineGenerateError), ("dead", EngineDeadError)):
        actor = rollout()
        actor.llm.faults = [fault]
        with pytest.raises(error):
            single_turn(actor, tokenizer, vllm.SamplingParams(max_tokens=None))


def test_replies_stop_at_max_model_len(rollout: Any, tokenizer: Any) -> None:
    ids = tokenizer(PROMPT)["input_ids"]
    final = asyncio.run(rollout(max_model_len=len(ids) + 2).generate(ids, vllm.SamplingParams(max_tokens=None)))
    assert len(final.outputs[0].token_ids) == 2 and final.outputs[0].finish_reason == "length"
