"""Construction: the prompt carries the contract, a worked example, the design and the complexity knob; the program
is extracted from the reply and the whole exchange is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gymverse_synth.construction import (
    ProgramExtractionError,
    build_construction_messages,
    complexity_literal,
    construct,
    extract_program,
)
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.spec import EnvDesign
from gymverse_synth.testing.scripted_server import ScriptedLLMServer

FIX = Path(__file__).parent / "synth_fixtures"


@pytest.fixture
def design() -> EnvDesign:
    return EnvDesign.model_validate(json.loads((FIX / "sort_design.json").read_text()))


def test_prompt_has_contract_example_design_and_knob(design: EnvDesign) -> None:
    system, user = build_construction_messages(design)
    assert system["role"] == "system" and user["role"] == "user"
    # the contract, with the hooks and the RNG rule
    for needle in ("_reset(self)", "_step(self, action: str)", "solve(self)", "self.rng", "ActionFormatError"):
        assert needle in system["content"]
    # the worked example is the real built-in env source
    assert "class GuessTheNumber(Env):" in system["content"]
    assert json.loads(user["content"].split("```json\n", 1)[1].split("```", 1)[0])["name"] == "SortBySwaps"
    assert "complexity_params = {'length': (3, 12), 'slack': (4, 0)}" in user["content"]
    assert '"algorithm"' in user["content"]  # core's spelling of the domain


def test_example_can_be_an_env_file(design: EnvDesign) -> None:
    system, _ = build_construction_messages(design, example=str(FIX / "good_env.py"))
    assert "class SortBySwaps(Env):" in system["content"]
    assert "GuessTheNumber" not in system["content"]


def test_complexity_literal_keeps_floats_and_order(design: EnvDesign) -> None:
    d = design.model_copy(update={"complexity_params": list(reversed(design.complexity_params))})
    assert complexity_literal(d) == "{'slack': (4, 0), 'length': (3, 12)}"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Here:\n```python\nclass A(Env):\n    pass\n```\nDone.", "class A(Env):\n    pass\n"),
        ("```py\nx = 1\n```\n```python\nclass B(Env):\n    x = 2\n```", "class B(Env):\n    x = 2\n"),
        ("```\nclass C(Env):\n    pass\n```", "class C(Env):\n    pass\n"),
        # cut by the token budget: the partial program is kept so validation reports the syntax error
        ("```python\nclass D(Env):\n    def f(self", "class D(Env):\n    def f(self\n"),
        ("class E:\n    pass", "class E:\n    pass\n"),
    ],
)
def test_extract_program(reply: str, expected: str) -> None:
    assert extract_program(reply) == expected


def test_extract_program_without_code_raises() -> None:
    with pytest.raises(ProgramExtractionError, match="no ```python fenced block"):
        extract_program("I cannot write that environment.")


def test_construct_records_the_exchange(design: EnvDesign) -> None:
    program = (FIX / "good_env.py").read_text()
    with ScriptedLLMServer([f"Sure.\n```python\n{program}```"]) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        ex = construct(design, client, max_tokens=900)
        assert server.completion_requests[0].body["max_tokens"] == 900
    assert ex.ok and ex.program == program
    assert ex.stage == "construction" and ex.round == 0 and ex.model == "scripted"
    assert ex.messages == build_construction_messages(design)
    assert ex.prompt_tokens > 100 and ex.completion_tokens > 50
    assert ex.sampling == {"max_tokens": 900}


def test_construct_reply_without_program_is_recorded_not_raised(design: EnvDesign) -> None:
    with ScriptedLLMServer(["no code today"]) as server:
        ex = construct(design, OpenAIClient(server.base_url, model="scripted", max_retries=0))
    assert not ex.ok and ex.program == ""
    assert ex.reply == "no code today"
    assert ex.error is not None and "no ```python" in ex.error
