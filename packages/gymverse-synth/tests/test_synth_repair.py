"""Repair: a failing program goes back to the model with its failure reasons; the fixed reply is validated again.

The scripted OpenAI-compatible server answers the design request with a valid design, the construction request
with a broken fixture program, and the repair request with the correct program.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gymverse_synth.artifacts import load_index, read_json
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.testing.router import StageRouter
from gymverse_synth.testing.scripted_server import ScriptedLLMServer
from gymverse_synth.validation import ValidationConfig

FIX = Path(__file__).parent / "synth_fixtures"
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=5.0, memory_mb=600)
SEED = Seed(domain="Algorithm", idea="Sort a list with as few swaps as possible.")


def fenced(name: str) -> str:
    return f"Here is the program.\n```python\n{(FIX / f'{name}.py').read_text()}```\n"


DESIGN = (FIX / "sort_design.json").read_text()


@pytest.mark.parametrize(
    ("broken", "check"),
    [("crash_level10", "reset"), ("no_effect", "complexity_effect"), ("oracle_fails", "oracle")],
)
def test_repair_fixes_a_fixable_program(tmp_path: Path, broken: str, check: str) -> None:
    router = StageRouter([DESIGN], [fenced(broken), fenced("good_env")])
    with ScriptedLLMServer(handler=router) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        summary = run_pipeline([SEED], client, SynthConfig(out=tmp_path, max_repairs=2, validation=FAST))
        requests = server.completion_requests
    assert summary.accepted == 1, summary.outcomes[0].reasons
    outcome = summary.outcomes[0]
    assert outcome.repair_rounds == 1 and outcome.artifact == "SortBySwaps"
    # three requests: design, construction, one repair; the repair request quoted the real failure and the program
    assert len(requests) == 3
    repair_prompt = requests[2].last_user_message
    assert f"/{check}" in repair_prompt and "failed validation (round 1 of 2)" in repair_prompt
    assert (FIX / f"{broken}.py").read_text().strip() in repair_prompt
    # every round is kept on disk
    stages = tmp_path / SEED.id
    v0, v1 = read_json(stages / "validation_r0.json"), read_json(stages / "validation_r1.json")
    assert not v0["passed"] and check in [f["check"] for f in v0["failures"]]
    assert v1["passed"]
    assert (stages / "env_r0.py").read_text() == (FIX / f"{broken}.py").read_text()
    assert read_json(stages / "repair_r1.json")["stage"] == "repair"
    prov = read_json(tmp_path / "suite" / "SortBySwaps" / "provenance.json")
    assert [r["passed"] for r in prov["repair_rounds"]] == [False, True]
    assert any(f"/{check}" in line for line in prov["repair_rounds"][0]["failures"])


def test_unfixable_program_is_rejected_with_its_reason(tmp_path: Path) -> None:
    router = StageRouter([DESIGN], [fenced("loops_forever"), fenced("loops_forever")])
    with ScriptedLLMServer(handler=router) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        config = SynthConfig(out=tmp_path, max_repairs=1, validation=ValidationConfig(seeds=(0,), timeout=3.0))
        summary = run_pipeline([SEED], client, config)
        assert "/timeout" in server.completion_requests[2].last_user_message
    outcome = summary.outcomes[0]
    assert outcome.status == "rejected" and outcome.stage == "checker"
    assert outcome.reason.startswith("[checker/timeout") and outcome.repair_rounds == 1
    assert summary.rejected_by_reason == {"checker/timeout": 1}
    entry = load_index(tmp_path / "suite")["envs"][SEED.id]
    assert entry["status"] == "rejected" and "timeout" in entry["reason"]
    assert not (tmp_path / "suite" / "SortBySwaps").exists()
    rejected = read_json(tmp_path / SEED.id / "rejected.json")
    assert "timeout" in rejected["reason"] and len(rejected["provenance"]["repair_rounds"]) == 2


def test_reply_without_program_is_repaired_from_the_design(tmp_path: Path) -> None:
    router = StageRouter([DESIGN], ["I would rather not.", fenced("good_env")])
    with ScriptedLLMServer(handler=router) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        summary = run_pipeline([SEED], client, SynthConfig(out=tmp_path, max_repairs=1, validation=FAST))
        repair = server.completion_requests[2].last_user_message
    assert summary.accepted == 1
    assert "no_program" in repair and '"name": "SortBySwaps"' in repair  # the design is resent
    assert json.loads((tmp_path / SEED.id / "validation_r0.json").read_text())["failures"][0]["check"] == "no_program"
