"""The whole pipeline against the real embedded SmolLM2-135M-Instruct with a small token budget.

The model is far too weak to write a valid environment; what is tested is that whatever it writes, the run ends
with a persisted, explained outcome. Seed A runs every stage from the abstraction; seed B resumes from a stored
design so the real model also goes through construction, sandboxed validation and a repair round.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymverse_synth.abstraction import AbstractionAttempt, AbstractionResult
from gymverse_synth.artifacts import atomic_write_json, load_index, read_json
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign
from gymverse_synth.validation import ValidationConfig

FIX = Path(__file__).parent / "synth_fixtures"


def test_local_model_run_ends_with_an_explained_outcome(smollm2_client: Any, tmp_path: Path) -> None:
    full = Seed(domain="Game", idea="Guess a hidden colour sequence from per-position hints.")
    resumed = Seed(domain="Algorithm", idea="Sort a list by swapping two positions per turn.")
    design_text = (FIX / "sort_design.json").read_text()
    stored = AbstractionResult(
        seed=resumed,
        model=smollm2_client.model,
        design=EnvDesign.model_validate_json(design_text),
        attempts=[AbstractionAttempt(index=0, reply=design_text)],
    )
    atomic_write_json(tmp_path / resumed.id / "abstraction.json", stored.model_dump(mode="json"))
    config = SynthConfig(
        out=tmp_path,
        max_repairs=1,
        abstraction_attempts=1,
        concurrency=1,
        sampling={"max_tokens": 64},
        validation=ValidationConfig(seeds=(0,), degeneracy_seeds=(0, 1, 2, 3), timeout=30.0),
    )
    before = smollm2_client.usage.requests
    summary = run_pipeline([full, resumed], smollm2_client, config)

    assert summary.errors == 0 and summary.accepted + summary.rejected == 2
    assert summary.completion_tokens > 0 and summary.model == smollm2_client.model
    index = load_index(tmp_path / "suite")["envs"]
    for seed, outcome in zip([full, resumed], summary.outcomes):
        assert read_json(tmp_path / seed.id / "outcome.json")["status"] == outcome.status
        entry = index[seed.id]
        if outcome.status == "accepted":
            assert (tmp_path / "suite" / str(outcome.artifact) / "env.py").is_file()
        else:  # rejected: the stage, the failed checks and a readable reason are all recorded
            assert outcome.reason and outcome.checks and entry["reason"] == outcome.reason
            assert (tmp_path / seed.id / "rejected.json").is_file()
    # seed B reused the stored design and went through construction and one repair with the real model
    b = summary.outcomes[1]
    assert b.stage != "abstraction"
    assert (tmp_path / resumed.id / "construction_r0.json").is_file()
    assert (tmp_path / resumed.id / "validation_r0.json").is_file()
    if b.status == "rejected":
        assert b.repair_rounds == 1 and (tmp_path / resumed.id / "repair_r1.json").is_file()
        assert (tmp_path / resumed.id / "validation_r1.json").is_file()
    # one design request for seed A (one attempt), then at most construction + repair per designed seed
    assert smollm2_client.usage.requests - before <= 1 + 2 * 2
    assert read_json(tmp_path / "summary.json")["seeds"] == 2
