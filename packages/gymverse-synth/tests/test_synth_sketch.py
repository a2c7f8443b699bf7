"""Construction by sketch: typed slots a small model can fill, checked slot by slot, rendered into a program that
passes the unchanged validation; requested under a JSON schema from servers that honour one."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from gymverse_synth.artifacts import read_json
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.sketch import Sketch, SketchError, check_sketch, render, worked_examples
from gymverse_synth.sketch_construct import (
    aconstruct_sketch,
    parse_reveal,
    parse_values,
    reveal_format,
    values_format,
)
from gymverse_synth.spec import EnvDesign
from gymverse_synth.testing import ScriptedLLMServer, StageRouter
from gymverse_synth.testing.structured import unsupported_features
from gymverse_synth.validation import ValidationConfig, validate_program

FIX = Path(__file__).parent / "synth_fixtures"
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=20.0, memory_mb=600)
DESIGN_TEXT = (FIX / "sort_design.json").read_text()
DESIGN = EnvDesign.model_validate(json.loads(DESIGN_TEXT))


def values_json(values: list[tuple[str, str]]) -> str:
    """A values reply as the offline model writes it under the schema: pretty JSON, one object."""
    return json.dumps({"values": [{"name": n, "expr": e} for n, e in values]}, indent=1)


def reveal_json(answer: str, question: str) -> str:
    """An answer-and-question reply."""
    return json.dumps({"answer": answer, "question": question}, indent=1)


def judged(values: list[tuple[str, str]], answer: str, question: str) -> tuple[Sketch, list[str]]:
    """Both replies parsed, tidied and checked, as the two requests do; raises `SketchError`."""
    drawn, mended = parse_values(DESIGN, values_json(values))
    reveal, more = parse_reveal(DESIGN, drawn, reveal_json(answer, question))
    return Sketch(values=drawn.values, answer=reveal.answer, question=reveal.question), mended + more


GOOD_VALUES = values_json(
    [("numbers", "[int(x) for x in self.rng.integers(1, 99, size=length)]"), ("k", "int(self.rng.integers(1, 3))")]
)
GOOD_REVEAL = reveal_json("sorted(numbers)[k]", "Which number is at 0-based position {k} of {numbers} once sorted?")


def construct(server: ScriptedLLMServer, **kwargs: object) -> tuple[str, dict[str, object], str | None]:
    client = OpenAIClient(server.base_url, "scripted", max_retries=0)
    ex = asyncio.run(aconstruct_sketch(DESIGN, client, **kwargs))  # type: ignore[arg-type]
    return ex.program, ex.parts, ex.error


@pytest.mark.parametrize("index", range(len(worked_examples(DESIGN))))
def test_every_worked_example_renders_into_a_program_the_unchanged_validation_accepts(index: int) -> None:
    _, sketch = worked_examples(DESIGN)[index]
    assert check_sketch(DESIGN, sketch) == []
    report = validate_program(render(DESIGN, sketch), FAST)
    assert report.passed, report.reasons()
    assert report.env_name == "SortBySwaps"


def test_a_reply_that_runs_past_its_expressions_is_salvaged_and_the_mends_are_recorded() -> None:
    # what SmolLM2-135M wrote under the schema: the expression, then `]},  # ...` until the string's length cap
    sketch, mended = judged(
        [("bits", "''.join(str(b) for b in self.rng.integers(0, 2, size=length))]},  # 1 bit string with even")],
        "'even' if bits.count('1') % 2 == 0 else 'odd'  # 1 bit stri' 1 bit",
        "Is the number of ones even or odd?  # 1 bit stri' 1 bit stri'",
    )
    assert sketch.values[0].expr == "''.join((str(b) for b in self.rng.integers(0, 2, size=length)))"
    assert sketch.answer == "'even' if bits.count('1') % 2 == 0 else 'odd'"
    # a question that shows no value cannot be answered: the values are appended as fields
    assert sketch.question == "Is the number of ones even or odd?\nbits: {bits}"
    assert [m.split(":")[0] for m in mended] == ["values.bits", "answer", "question"]
    report = validate_program(render(DESIGN, sketch), FAST)
    assert report.stage not in ("static", "load"), report.reasons()


@pytest.mark.parametrize(
    ("values", "answer", "question", "expected"),
    [
        ([("xs", "open('/etc/passwd').read()")], "len(xs)", "{xs}", "values[0] (xs): `open` may not be used"),
        ([("xs", "__import__('os').listdir('/')")], "len(xs)", "{xs}", "the name `__import__` is not allowed"),
        ([("xs", "self.rng.__class__.__mro__")], "len(xs)", "{xs}", "private or dunder attribute `.__mro__`"),
        ([("xs", "self.__dict__")], "len(xs)", "{xs}", "dunder attribute `.__dict__`"),
        ([("xs", "self.answer_value")], "xs", "{xs}", "`self.answer_value` does not exist here"),
        ([("xs", "eval('1+1')")], "xs", "{xs}", "`eval` may not be used"),
        ([("xs", "(lambda: 1)()")], "xs", "{xs}", "lambda is not allowed"),
        ([("xs", "[1, 2]")], "len(xs)", "{xs.__class__.__init__.__globals__}", "fields ['xs.__class__"),
        ([("xs", "[1, 2]")], "len(xs)", "{xs} {", "question: not a valid template"),
        ([("xs", "[1, 2]")], "len(xs)", "{xs:{xs.__class__}}", "fields ['xs.__class__'] are not values"),
        ([("xs", "[1, 2]")], "7", "{xs}", "answer: a constant; compute it from the values ['xs']"),
        ([("xs", "size + 1")], "xs", "{xs}", "unknown name `size`; available: ['length', 'slack']"),
        ([("for", "1")], "1", "{for}", "`for` shadows a name the program uses"),
        ([("sum", "1")], "sum", "{sum}", "`sum` shadows a name the program uses"),
    ],
)  # fmt: skip
def test_slots_that_reach_outside_the_task_are_rejected_naming_the_slot(
    values: list[tuple[str, str]], answer: str, question: str, expected: str
) -> None:
    with pytest.raises(SketchError) as err:
        judged(values, answer, question)
    assert any(expected in f for f in err.value.failures), err.value.failures


def test_values_come_first_then_the_answer_each_under_its_schema_which_a_vllm_like_server_forces() -> None:
    # prose around the JSON and a key the schema does not have: the schema-enforcing server keeps only the values
    loose = 'Sure! {"values": [{"name": "numbers", "expr": "list(self.rng.permutation(length + 2))", "why": "a"}]} Done'
    with ScriptedLLMServer([loose, GOOD_REVEAL.replace("[k]", "[0]").replace("{k}", "0")], structured="vllm") as server:
        program, parts, error = construct(server)
        requests = server.completion_requests
    assert error is None and server.constrained >= 1
    assert [r.body["response_format"]["json_schema"]["name"] for r in requests] == ["Values", "Reveal"]
    # the answer's schema names the values accepted by the first request
    assert "numbers" in requests[1].body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["pattern"]
    assert "numbers = list(self.rng.permutation(length + 2))" in requests[1].last_user_message
    assert isinstance(parts["sketch"], dict) and parts["sketch"]["values"][0]["name"] == "numbers"
    assert validate_program(program, FAST).passed


def test_the_schemas_are_ones_vllm_compiles_and_they_steer_away_from_prose() -> None:
    drawn = parse_values(DESIGN, GOOD_VALUES)[0]
    for fmt in (values_format(DESIGN), reveal_format(DESIGN, drawn)):
        assert unsupported_features(fmt["json_schema"]["schema"]) == []
    expr = values_format(DESIGN)["json_schema"]["schema"]["$defs"]["Value"]["properties"]["expr"]["pattern"]
    answer = reveal_format(DESIGN, drawn)["json_schema"]["schema"]["properties"]["answer"]["pattern"]
    assert re.fullmatch(expr, "[int(x) for x in self.rng.integers(1, 9, size=length)]")
    assert re.fullmatch(expr, "length * 2") and re.fullmatch(expr, "sorted(self.rng.permutation(slack))")
    assert not re.fullmatch(expr, "The hidden integer in [1, upper]")  # what SmolLM2 wrote into a free string
    assert not re.fullmatch(expr, "[1, 2]},  # 1 bit string")
    assert re.fullmatch(answer, "sorted(numbers)[k]") and re.fullmatch(answer, "numbers[k] + 1")
    assert not re.fullmatch(answer, "The hidden integer") and not re.fullmatch(answer, "100")


def test_a_rejected_part_is_asked_again_alone_with_its_failing_slots_named() -> None:
    bad = values_json([("numbers", "open('x')")])
    with ScriptedLLMServer([bad, GOOD_VALUES, GOOD_REVEAL]) as server:
        program, parts, error = construct(server)
        requests = server.completion_requests
    assert error is None and "sorted(numbers)[k]" in program
    assert "values[0] (numbers): `open` may not be used" in requests[1].last_user_message
    attempts = parts["attempts"]
    assert isinstance(attempts, list)
    assert [(a["part"], bool(a["failures"])) for a in attempts] == [
        ("values", True),
        ("values", False),
        ("answer", False),
    ]
    assert validate_program(program, FAST).passed


def test_a_sketch_rejected_every_time_ends_construction_naming_the_slot() -> None:
    bad = reveal_json("7", "{numbers}")
    with ScriptedLLMServer([GOOD_VALUES, bad, bad]) as server:
        program, _, error = construct(server, attempts=2)
    assert program == ""
    assert error is not None and error.startswith("the answer part was rejected 2 times") and "a constant" in error


def test_a_failed_validation_goes_back_as_the_next_rounds_note(tmp_path: Path) -> None:
    # integers(1, length - 3) has an empty range at level 1 (length 3): the reset crashes, validation says so
    crashing = values_json([("numbers", "[int(x) for x in self.rng.integers(1, length - 3, size=4)]")])
    router = StageRouter([DESIGN_TEXT], [crashing, reveal_json("sum(numbers)", "Sum of {numbers}?"), GOOD_VALUES,
                                         GOOD_REVEAL])  # fmt: skip
    with ScriptedLLMServer(handler=router) as server:
        client = OpenAIClient(server.base_url, "scripted", max_retries=0)
        config = SynthConfig(out=tmp_path, validation=FAST, construction="sketch", max_repairs=1)
        summary = run_pipeline([Seed(domain="Algorithm", idea="Sort a list.")], client, config)
        repair_request = server.completion_requests[-1]
    assert summary.accepted == 1, summary.outcomes[0].reasons
    assert "The previous program failed validation" in repair_request.last_user_message
    assert "high <= 0" in repair_request.last_user_message or "low >= high" in repair_request.last_user_message
    seed_dir = next(p for p in tmp_path.iterdir() if (p / "repair_r1.json").is_file())
    assert not read_json(seed_dir / "validation_r0.json")["passed"]
    assert "sorted(numbers)[k]" in (tmp_path / "suite" / "SortBySwaps" / "env.py").read_text()
