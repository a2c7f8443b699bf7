"""The pipeline end to end against a scripted OpenAI-compatible server: abstraction retries, resuming an interrupted
run without repeating finished stages, concurrency under a limit, and the run summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gymverse_synth.artifacts import load_index, read_json
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.testing.router import StageRouter, is_design_request
from gymverse_synth.testing.scripted_server import RecordedRequest, Reply, ScriptedLLMServer
from gymverse_synth.validation import ValidationConfig

FIX = Path(__file__).parent / "synth_fixtures"
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=10.0, memory_mb=600)
DESIGN = (FIX / "sort_design.json").read_text()
GOOD = f"```python\n{(FIX / 'good_env.py').read_text()}```"
SEED = Seed(domain="Algorithm", idea="Sort a list with as few swaps as possible.")


def client_for(server: ScriptedLLMServer) -> OpenAIClient:
    return OpenAIClient(server.base_url, model="scripted", max_retries=0)


def test_invalid_abstraction_json_is_retried_with_the_error(tmp_path: Path) -> None:
    router = StageRouter(["The design: {name: SortBySwaps, oops", DESIGN], [GOOD])
    with ScriptedLLMServer(handler=router) as server:
        summary = run_pipeline([SEED], client_for(server), SynthConfig(out=tmp_path, validation=FAST))
        retry = server.completion_requests[1]
    assert summary.accepted == 1
    assert is_design_request(retry) and "not valid JSON" in retry.last_user_message
    attempts = read_json(tmp_path / SEED.id / "abstraction.json")["attempts"]
    assert [a["error_kind"] for a in attempts] == ["json", None]


def test_abstraction_that_never_validates_is_rejected_without_writing_code(tmp_path: Path) -> None:
    bad_design = json.loads(DESIGN) | {"complexity_params": []}
    router = StageRouter(["no json here", json.dumps(bad_design)], [])
    with ScriptedLLMServer(handler=router) as server:
        config = SynthConfig(out=tmp_path, abstraction_attempts=2, validation=FAST)
        summary = run_pipeline([SEED], client_for(server), config)
        assert len(server.completion_requests) == 2  # no construction request
    outcome = summary.outcomes[0]
    assert outcome.status == "rejected" and outcome.stage == "abstraction"
    assert outcome.checks == ["json", "validation"]
    assert "complexity_params" in outcome.reasons[-1]
    assert load_index(tmp_path / "suite")["envs"][SEED.id]["stage"] == "abstraction"
    assert summary.rejected_by_reason == {"abstraction/json": 1}


class FailAfter:
    """A client that works for `n` requests, then raises (a crashed process, a dead network)."""

    def __init__(self, inner: OpenAIClient, n: int) -> None:
        self.inner, self.n = inner, n
        self.model, self.usage = inner.model, inner.usage

    async def achat(self, messages: Any, **sampling: Any) -> Any:
        if self.n == 0:
            raise RuntimeError("connection to the model lost")
        self.n -= 1
        return await self.inner.achat(messages, **sampling)


def test_resume_after_interruption_skips_finished_stages(tmp_path: Path) -> None:
    config = SynthConfig(out=tmp_path, validation=FAST)
    with ScriptedLLMServer(handler=StageRouter([DESIGN], [])) as first:
        summary = run_pipeline([SEED], FailAfter(client_for(first), 1), config)  # type: ignore[arg-type]
    assert summary.errors == 1 and "connection to the model lost" in summary.outcomes[0].reason
    assert (tmp_path / SEED.id / "abstraction.json").is_file()
    assert not (tmp_path / SEED.id / "outcome.json").exists()  # an error is not an outcome: rerun resumes

    with ScriptedLLMServer(handler=StageRouter([], [GOOD])) as second:
        summary = run_pipeline([SEED], client_for(second), config)
        assert not any(is_design_request(r) for r in second.completion_requests)  # abstraction not re-requested
        assert len(second.completion_requests) == 1
    assert summary.accepted == 1

    with ScriptedLLMServer() as third:  # everything done: nothing is requested, the outcome is read back
        again = run_pipeline([SEED], client_for(third), config)
        assert third.completion_requests == []
    assert again.outcomes[0] == summary.outcomes[0]


def test_unreachable_model_is_an_error_a_rerun_retries(tmp_path: Path) -> None:
    config = SynthConfig(out=tmp_path, validation=FAST)
    with ScriptedLLMServer(handler=StageRouter([DESIGN], [Reply.error(503)])) as server:
        summary = run_pipeline([SEED], client_for(server), config)
    outcome = summary.outcomes[0]
    assert outcome.status == "error" and outcome.checks == ["llm"] and "503" in outcome.reason
    # the failed construction record is on disk but marked transient, so the rerun asks again
    assert read_json(tmp_path / SEED.id / "construction_r0.json")["error"].startswith("LLM request failed")
    with ScriptedLLMServer(handler=StageRouter([], [GOOD])) as server:
        assert run_pipeline([SEED], client_for(server), config).accepted == 1


def test_seeds_run_concurrently_under_the_limit_and_are_summarized(tmp_path: Path) -> None:
    seeds = [Seed(domain="Algorithm", idea=f"sorting idea {k}") for k in range(3)]
    programs = {seeds[0].idea: "good_env", seeds[1].idea: "good_env", seeds[2].idea: "no_effect"}

    def handler(request: RecordedRequest) -> Reply:
        idea = next(i for i in programs if i in json.dumps(request.messages)) if is_design_request(request) else None
        if idea is not None:  # a design per seed, named after it so the artifacts differ
            name = {"good_env": "SortBySwaps"}.get(programs[idea], "SortNoEffect")
            return Reply(DESIGN.replace('"SortBySwaps"', f'"{name}"'), delay=0.2)
        name = "no_effect" if "SortNoEffect" in request.messages[-1]["content"] else "good_env"
        return Reply(f"```python\n{(FIX / f'{name}.py').read_text()}```", delay=0.2)

    config = SynthConfig(out=tmp_path, concurrency=2, max_repairs=0, validation=FAST)
    with ScriptedLLMServer(handler=handler) as server:
        summary = run_pipeline(seeds, client_for(server), config, progress=True)
        assert server.max_in_flight <= 2
    assert (summary.seeds, summary.accepted, summary.rejected, summary.errors) == (3, 2, 1, 0)
    assert summary.rejected_by_reason == {"checker/complexity_effect": 1}
    assert summary.repair_rounds == {"0": 3}
    assert summary.prompt_tokens > 0 and summary.completion_tokens > 0
    assert read_json(tmp_path / "summary.json") == json.loads(summary.model_dump_json())
    # two seeds designed the same class name: the second artifact gets a distinct directory
    assert sorted(o.artifact for o in summary.outcomes if o.artifact) == ["SortBySwaps", "SortBySwaps_2"]
    index = load_index(tmp_path / "suite")["envs"]
    assert {e["status"] for e in index.values()} == {"accepted", "rejected"} and len(index) == 3
