"""Construction in parts against the scripted OpenAI-compatible server: parts asked one by one and assembled into a
program that passes validation, a rejected part repaired on its own, and a failed validation redoing only the part it
points to."""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
from pathlib import Path

import pytest
from gymverse_synth import synth_cli
from gymverse_synth.artifacts import read_json
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.parts import PART_BY_NAME, PARTS, PartError, PartsState, aconstruct_parts, check_part, extract_part
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign
from gymverse_synth.testing import RecordedRequest, Reply, ScriptedLLMServer, StageRouter
from gymverse_synth.validation import ValidationConfig, static_check, validate_program

FIX = Path(__file__).parent / "synth_fixtures"
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=20.0, memory_mb=600)
DESIGN_TEXT = (FIX / "sort_design.json").read_text()
DESIGN = EnvDesign.model_validate(json.loads(DESIGN_TEXT))
GOOD = (FIX / "good_env.py").read_text()
GRAMMAR = 'GRAMMAR = CommandGrammar({"swap": [int, int]})'


def method_of(name: str) -> str:
    """The source of method `name` of the good fixture, as a bare (dedented) def."""
    lines = GOOD.splitlines()
    node = next(n for n in ast.walk(ast.parse(GOOD)) if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(line.removeprefix("    ") for line in lines[node.lineno - 1 : node.end_lineno])


def good_reply(part: str) -> str:
    """A fenced reply with the good part; the step part comes inside a class, with the module constant it uses."""
    method = method_of(PART_BY_NAME[part].method)
    if part == "step":
        body = "\n".join("    " + line for line in method.splitlines())
        return f"Here it is:\n```python\n{GRAMMAR}\n\nclass SortBySwaps(Env):\n{body}\n```\nDone."
    return f"```python\n{method}\n```"


def asked_part(request: RecordedRequest) -> str:
    """Which part a request asks for (its first user message names the method)."""
    first_user = request.messages[1]["content"]
    return next(p.name for p in PARTS if f"Write the method `{p.signature}`" in first_user)


class PartScript:
    """Replies per part, in order; a part with no scripted reply left gets the good one."""

    def __init__(self, **replies: list[str | Reply]) -> None:
        self.replies = {k: list(v) for k, v in replies.items()}
        self.asked: list[str] = []

    def __call__(self, request: RecordedRequest) -> str | Reply:
        part = asked_part(request)
        self.asked.append(part)
        queue = self.replies.get(part) or []
        return queue.pop(0) if queue else good_reply(part)


def construct(server: ScriptedLLMServer, **kwargs: object) -> tuple[str, dict[str, object], str | None]:
    client = OpenAIClient(server.base_url, "scripted", max_retries=0)
    ex = asyncio.run(aconstruct_parts(DESIGN, client, **kwargs))  # type: ignore[arg-type]
    return ex.program, ex.parts, ex.error


def test_parts_are_asked_one_by_one_and_assembled_into_a_program_that_passes_validation() -> None:
    script = PartScript()
    with ScriptedLLMServer(handler=script) as server:
        program, parts, error = construct(server)
        requests = server.completion_requests
    assert error is None and script.asked == ["reset", "step", "solve", "random_action"]
    # each request shows the class as written so far: the step request sees the accepted _reset, not the rest
    step_request = requests[1].messages[1]["content"]
    assert "def _reset(self)" in step_request and "def solve(self)" not in step_request
    assert "import" not in step_request, "no module frame for a small model to copy"
    # each part sees the design fields it needs (a small model copies long design prose into code)
    reset_request, solve_request = requests[0].messages[1]["content"], requests[2].messages[1]["content"]
    assert "oracle_strategy" not in reset_request and '"state"' not in reset_request
    assert "Selection sort" in solve_request
    assert "complexity_params = {'length': (3, 12), 'slack': (4, 0)}" in step_request
    # the module constant that came with the step part is hoisted above the class
    assert program.index(GRAMMAR) < program.index("class SortBySwaps(Env):")
    assert static_check(program) == []
    report = validate_program(program, FAST)
    assert report.passed, report.reasons()
    assert report.env_name == "SortBySwaps"
    assert set(PartsState.model_validate(parts).methods) == {p.name for p in PARTS}


def test_a_rejected_part_is_repaired_on_its_own() -> None:
    cut = Reply(
        content="```python\ndef _step(self, action: str) -> StepResult:\n    cmd = GRAMMAR.parse(",
        finish_reason="length",
    )
    script = PartScript(step=[cut, "```python\nimport os\n\n" + method_of("_step") + "\n```"])
    with ScriptedLLMServer(handler=script) as server:
        program, parts, error = construct(server)
        requests = server.completion_requests
    # only the step part was asked again, twice, each time with the failure of the reply before
    assert script.asked == ["reset", "step", "step", "step", "solve", "random_action"]
    second, third = requests[2].messages, requests[3].messages
    assert "syntax error" in second[-1]["content"] and "cut off by the token budget" in second[-1]["content"]
    assert second[-2] == {"role": "assistant", "content": cut.content}
    assert "import of 'os' is not allowed" in third[-1]["content"]
    assert len(third) == 4, "only the latest rejected reply goes back"
    # a greedy model asked again would write the same reply: retries sample, seeded by the attempt
    sampled = [(r.body.get("temperature"), r.body.get("seed"), r.body["max_tokens"]) for r in requests[1:4]]
    assert sampled == [(None, None, 512), (0.7, 1, 512), (0.7, 2, 512)], "a method's budget, not the server's context"
    state = PartsState.model_validate(parts)
    assert [a.part for a in state.attempts if a.failures] == ["step", "step"]
    assert error is None and static_check(program) == []


def test_a_reply_cut_off_after_the_method_keeps_the_method_and_drops_the_broken_tail() -> None:
    reply = "```python\n" + method_of("_reset") + "\n\ndef _reset_state(self):\n    self.items = [\n"
    code = check_part(DESIGN, PartsState(), PART_BY_NAME["reset"], reply, "length")
    assert "def _reset(self)" in code.method and "_reset_state" not in code.method + code.helpers
    # a method cut off in its last statement loses that statement, and what is left is judged like any method
    cut_in_method = reply.split("return f")[0] + 'return f"Sort ascending: {self.it'
    with pytest.raises(PartError, match="`_reset` never returns a value"):
        check_part(DESIGN, PartsState(), PART_BY_NAME["reset"], cut_in_method, "length")
    # a method with nothing complete in it is not salvaged: the syntax error goes back to the model
    with pytest.raises(PartError, match="cut off by the token budget"):
        check_part(DESIGN, PartsState(), PART_BY_NAME["reset"], reply.split("self.params")[0], "length")


def test_a_part_rejected_every_time_ends_construction_naming_it() -> None:
    script = PartScript(solve=["def solve(self):\n    pass"] * 2)
    with ScriptedLLMServer(handler=script) as server:
        program, parts, error = construct(server, attempts=2)
    assert program == "" and error is not None
    assert error.startswith("part solve was rejected 2 times") and "never returns a value" in error
    assert PartsState.model_validate(parts).missing == ["solve", "random_action"]


@pytest.mark.parametrize(
    ("part", "reply", "expected"),
    [
        ("step", "def _step(self):\n    return 1", "`_step` must take (self, action), got (self)"),
        ("reset", "Sure! I would start by reading the params.", "defines no method `_reset`"),
        ("solve", "def solve(self):\n    return np.random.randint(3)", "global numpy RNG"),
        ("solve", "def solve(self):\n    return eval('1')", "calling eval() is not allowed"),
    ],
)
def test_part_checks_name_the_problem(part: str, reply: str, expected: str) -> None:
    with pytest.raises(PartError) as err:
        check_part(DESIGN, PartsState(), PART_BY_NAME[part], reply, "stop")
    assert expected in str(err.value)


def test_helper_methods_come_with_their_part_and_other_parts_do_not() -> None:
    reply = (
        "class SortBySwaps(Env):\n    def solve(self) -> str:\n        return self._next()\n\n"
        "    def _next(self) -> str:\n        return 'x'\n\n    def _step(self, action):\n        return None\n"
    )
    code = extract_part(PART_BY_NAME["solve"], reply)
    assert "def _next(self)" in code.method and "def _step" not in code.method


def test_a_failed_validation_redoes_only_the_part_it_points_to(tmp_path: Path) -> None:
    wrong_oracle = "```python\ndef solve(self) -> str:\n    return '\\\\boxed{swap 0 0}'\n```"
    script = PartScript(solve=[wrong_oracle])
    router = StageRouter([DESIGN_TEXT], [])
    with ScriptedLLMServer(
        handler=lambda r: router(r) if r.messages[1]["content"].startswith("Domain") else script(r)
    ) as server:
        client = OpenAIClient(server.base_url, "scripted", max_retries=0)
        config = SynthConfig(out=tmp_path, validation=FAST, construction="parts", max_repairs=1)
        summary = run_pipeline([Seed(domain="Algorithm", idea="Sort by swaps.")], client, config)
        repair_request = server.completion_requests[-1]
    assert summary.accepted == 1, summary.outcomes[0].reasons
    assert script.asked == ["reset", "step", "solve", "random_action", "solve"]
    assert (
        "failed validation" in repair_request.messages[1]["content"]
        and "oracle" in repair_request.messages[1]["content"]
    )
    seed_dir = next(p for p in tmp_path.iterdir() if (p / "repair_r1.json").is_file())
    assert read_json(seed_dir / "validation_r0.json")["failures"][0]["check"] == "oracle"
    assert [a["part"] for a in read_json(seed_dir / "repair_r1.json")["parts"]["attempts"]] == ["solve"]


@pytest.mark.parametrize(
    ("llm", "flag", "expected"),
    [("local", "auto", "sketch"), ("http://127.0.0.1:9/v1", "auto", "whole"), ("local", "whole", "whole"),
     ("http://127.0.0.1:9/v1", "parts", "parts")],
)  # fmt: skip
def test_cli_builds_from_a_sketch_by_default_for_the_offline_model(
    llm: str, flag: str, expected: str, tmp_path: Path
) -> None:
    args = argparse.Namespace(llm=llm, construction=flag, max_tokens=None, temperature=None, timeout=30.0,
                              memory_mb=600, max_repairs=0)  # fmt: skip
    assert synth_cli._config(args, tmp_path).construction == expected
