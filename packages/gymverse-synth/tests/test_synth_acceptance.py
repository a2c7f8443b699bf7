"""Acceptance and evolution: the artifact directory, the suite index, `register_suite` + `gymverse.make`, and a
harder variant synthesized from an accepted env."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymverse
import pytest
from gymverse.registry import deregister, list_envs
from gymverse_synth.artifacts import load_index, read_json, register_suite
from gymverse_synth.evolve import evolve, harder_check
from gymverse_synth.llm import OpenAIClient
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign
from gymverse_synth.testing.router import StageRouter
from gymverse_synth.testing.scripted_server import ScriptedLLMServer
from gymverse_synth.validation import ValidationConfig

FIX = Path(__file__).parent / "synth_fixtures"
FAST = ValidationConfig(seeds=(0, 1), degeneracy_seeds=tuple(range(6)), timeout=10.0, memory_mb=600)
DESIGN = (FIX / "sort_design.json").read_text()
GOOD = (FIX / "good_env.py").read_text()
SEED = Seed(domain="Algorithm", idea="Sort a list with as few swaps as possible.")


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth-run")
    with ScriptedLLMServer(handler=StageRouter([DESIGN], [f"```python\n{GOOD}```"])) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        summary = run_pipeline([SEED], client, SynthConfig(out=out, validation=FAST))
    assert summary.accepted == 1
    return out


@pytest.fixture
def family() -> Iterator[str]:
    yield "synthtest"
    for env_id in list_envs("synthtest"):
        deregister(env_id)


def test_artifact_directory_holds_spec_program_validation_provenance(suite_run: Path) -> None:
    art = suite_run / "suite" / "SortBySwaps"
    assert sorted(p.name for p in art.iterdir()) == ["env.py", "provenance.json", "spec.json", "validation.json"]
    assert (art / "env.py").read_text() == GOOD
    assert EnvDesign.model_validate(read_json(art / "spec.json")) == EnvDesign.model_validate_json(DESIGN)
    assert read_json(art / "validation.json")["passed"] is True
    prov = read_json(art / "provenance.json")
    assert prov["model"] == "scripted" and prov["seed_idea"] == SEED.idea
    assert [p["stage"] for p in prov["prompts"]] == ["abstraction", "construction"]
    assert prov["tokens"]["prompt"] > 0 and prov["tokens"]["completion"] > 0
    assert {"abstraction", "construction_r0", "validation_r0"} <= set(prov["timings"])
    entry = load_index(suite_run / "suite")["envs"][SEED.id]
    assert entry["status"] == "accepted" and entry["artifact"] == "SortBySwaps"
    assert (suite_run / "suite" / entry["stages_dir"] / "outcome.json").is_file()
    # no temp files are left behind by the atomic writes
    assert not [p for p in (suite_run / SEED.id).iterdir() if p.name.startswith(".")]


def test_registered_suite_is_made_by_id(suite_run: Path, family: str) -> None:
    ids = register_suite(suite_run / "suite", family=family)
    assert f"{family}:SortBySwaps" in ids
    env = gymverse.make(f"{family}:SortBySwaps", complexity=10)
    obs, _ = env.reset(seed=3)
    assert "Sort ascending" in obs and len(vars(env)["items"]) == 12  # level 10 of the declared knob
    for _ in range(env.max_turns):
        result = env.step(env.solve())
        if result.done:
            break
    assert result.info["success"] is True
    assert register_suite(suite_run / "suite", family=family) == ids  # re-registering is allowed


def test_register_suite_names_a_missing_program(tmp_path: Path, suite_run: Path) -> None:
    (tmp_path / "index.json").write_text((suite_run / "suite" / "index.json").read_text())
    with pytest.raises(FileNotFoundError, match=r"SortBySwaps/env\.py"):
        register_suite(tmp_path, family="synthmissing")


def harder_design(name: str, level_10: int) -> str:
    data = json.loads(DESIGN)
    data["name"] = name
    data["complexity_params"][0]["level_10"] = level_10
    return json.dumps(data)


def test_harder_check() -> None:
    old = EnvDesign.model_validate_json(DESIGN)
    assert harder_check(old, EnvDesign.model_validate_json(harder_design("X1x", 16))) is None
    why = harder_check(old, EnvDesign.model_validate_json(harder_design("X1x", 10)))
    assert why is not None and "not harder" in why


def test_evolve_synthesizes_a_validated_harder_variant(suite_run: Path, family: str) -> None:
    parent = suite_run / "suite" / "SortBySwaps"
    variant = GOOD.replace("class SortBySwaps(Env)", "class SortBySwapsV2(Env)").replace(
        '"length": (3, 12)', '"length": (3, 16)'
    )
    router = StageRouter([DESIGN, harder_design("Whatever", 16)], [f"```python\n{variant}```"])
    with ScriptedLLMServer(handler=router) as server:
        client = OpenAIClient(server.base_url, model="scripted", max_retries=0)
        outcome = evolve(parent, client, 0.9, config=SynthConfig(out=suite_run / "evo", suite_dir=suite_run / "suite",
                                                                validation=FAST))  # fmt: skip
        first, retry, construction = server.completion_requests
    assert "succeed 90% of the time" in first.last_user_message and '"SortBySwapsV2"' in first.last_user_message
    assert "not harder" in retry.last_user_message  # the unchanged design was fed back
    assert "class SortBySwaps(Env):" in construction.messages[0]["content"]  # the parent is the worked example
    assert outcome.status == "accepted" and outcome.artifact == "SortBySwapsV2"
    spec = read_json(suite_run / "suite" / "SortBySwapsV2" / "spec.json")
    assert spec["name"] == "SortBySwapsV2" and spec["complexity_params"][0]["level_10"] == 16
    prov = read_json(suite_run / "suite" / "SortBySwapsV2" / "provenance.json")
    assert prov["seed"]["payload"]["parent"] == str(parent.resolve())
    assert prov["seed"]["payload"]["measured_success"] == 0.9
    ids = register_suite(suite_run / "suite", family=family)
    assert f"{family}:SortBySwapsV2" in ids
    env = gymverse.make(f"{family}:SortBySwapsV2", complexity=10)
    env.reset(seed=0)
    assert len(vars(env)["items"]) == 16


def test_evolve_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        evolve(tmp_path, None, 1.5)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError, match=r"spec\.json is missing"):
        evolve(tmp_path, None, 0.5)  # type: ignore[arg-type]
