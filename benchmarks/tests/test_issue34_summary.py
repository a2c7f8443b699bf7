"""`issue34`: SUMMARY.md's verdict per target from fixture result JSONs (made-up numbers, never timings)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import issue34
import pytest

MACHINE = {"processor": "x86_64", "cpus": 2, "python": "3.11.7", "load_avg_1m": 4.2}


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def turn_doc(name: str, case: str, ratios: dict[str, float]) -> dict[str, Any]:
    rows = []
    for env, r in ratios.items():
        c = case.format(env=env)
        rows += [
            {"case": c, "arm": "native", "cpu_ms_per_turn": 0.2, "ratio_vs_native": 1.0},
            {"case": c, "arm": "gymverse", "cpu_ms_per_turn": 0.2 * r, "ratio_vs_native": r, "wall_ratio_vs_native": 1},
        ]
    return {"benchmark": name, "machine": MACHINE, "args": {"quick": False, "rollout_only": True}, "rows": rows}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    ratios = {"game:GuessTheNumber": 0.9, "game:Mastermind": 1.0, "tool-use:UnitConversion": 1.2}
    write(tmp_path / "frameworks" / "rl2.json", turn_doc("rl2", "rollout {env} x64", ratios))
    env_rows = [
        {"case": "cheap N=8", "arm": "gymverse sessions", "vs gem AsyncVectorEnv": 0.4},
        {"case": "io N=64", "arm": "gymverse sessions", "vs gem AsyncVectorEnv": 1.3},
    ]
    write(tmp_path / "frameworks" / "env_layer.json", {"benchmark": "env_layer", "machine": MACHINE, "rows": env_rows})
    hosted = {"name": "hosted checker vs in-process, 40 files", "value": 1.05, "limit": 1.1, "unit": "x", "met": True}
    write(tmp_path / "frameworks" / "synth.json", {"benchmark": "synth", "rows": [], "targets": [hosted]})
    corpus = {"suite": "generated corpus (40 files)", "runs": {"sandbox": {"load_average": [1.0, 2.0]}},
              "hosted_over_inprocess": 1.3, "hosted_over_inprocess_jobs": 1.2, "machine": {"cpus": 2}}  # fmt: skip
    write(tmp_path / "evaluate_corpus.json", corpus)
    return tmp_path


def by_target(lines: list[issue34.Line]) -> dict[str, issue34.Line]:
    return {line.target: line for line in lines}


def test_verdicts_follow_the_issue_limits(results: Path) -> None:
    got = by_target(issue34.lines(results))
    rl2 = "RL2 per-turn cost, {}, 64 episodes (CPU ms/turn)"
    assert got[rl2.format("game:GuessTheNumber")].met is True
    assert got[rl2.format("game:Mastermind")].met is True  # <= 1.0x: equal is met
    assert got[rl2.format("tool-use:UnitConversion")].met is False
    assert (
        "--rollout-only" in got[rl2.format("game:Mastermind")].source
        and "load 4.2" in got[rl2.format("game:Mastermind")].source
    )
    assert got["sessions vs GEM AsyncVectorEnv, cheap env, N=8"].met is False
    assert got["sessions vs GEM AsyncVectorEnv, io env, N=64"].met is True
    missing_row = got["sessions vs GEM AsyncVectorEnv, cheap env, N=64"]  # the file lacks the row: not a verdict
    assert missing_row.met is None and missing_row.measured is None
    assert got["hosted checker vs in-process, 40 files"].met is True
    corpus = got["gymverse evaluate, hosted vs in-process checker, generated corpus (40 files)"]
    assert corpus.met is False and corpus.measured == 1.3 and "[1.0, 2.0]" in corpus.source


def test_absent_results_are_not_measured_with_the_command_that_measures_them(tmp_path: Path) -> None:
    lines = issue34.lines(tmp_path)
    assert lines and all(line.met is None for line in lines)
    oat = by_target(lines)["oat per-turn cost, game:Mastermind, 64 episodes (CPU ms/turn)"]
    assert ".venv-oat/bin/python benchmarks/frameworks/bench_oat.py" in oat.source
    train = [line for line in lines if line.target.startswith("gymverse train")]
    assert len(train) == 2 and all("train_gpu.py" in line.source for line in train)


def test_summary_markdown_counts_and_notes(results: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("- UnitConversion: the measured reason.\n")
    out = issue34.write(results, tmp_path / "SUMMARY.md", notes)
    text = out.read_text()
    assert (
        "| RL2 per-turn cost, tool-use:UnitConversion, 64 episodes (CPU ms/turn) | 1.20x | <= 1.0x | **not met** |"
        in text
    )
    assert "## Notes" in text and "the measured reason" in text
    lines = issue34.lines(results)
    met, missed = sum(x.met is True for x in lines), sum(x.met is False for x in lines)
    assert f"{met} met, {missed} not met, {len(lines) - met - missed} not measured." in text


def test_each_train_run_gets_its_own_pair_of_rows(tmp_path: Path) -> None:
    def run(params_m: float, rollout: float, update: float, episodes: int) -> dict[str, Any]:
        peers = {"rollout_ratio": rollout, "update_ratio": update, "rollout_tokens_per_s": 900.0,
                 "plain_generate_tokens_per_s": 1000.0, "update_s": 0.3, "plain_update_s": 0.25}  # fmt: skip
        steps = [{"episodes": episodes, "layer_ms_per_call": 21.0}]
        cfg = {"device": "cuda", "steps": 4, "hidden": 896, "layers": 24, "prompts": episodes // 8}
        return {"device": "NVIDIA H100", "params_m": params_m, "peers": peers, "steps": steps, "config": cfg}

    write(tmp_path / "train_gpu-small.json", run(202.5, 1.06, 1.6, 64))
    write(tmp_path / "train_gpu-large.json", run(309.4, 1.7, 0.9, 128))
    write(tmp_path / "train_gpu-old.json", {"device": "cpu", "steps": []})  # before the peers: no verdict from it
    train = [line for line in issue34.lines(tmp_path) if line.target.startswith("gymverse train")]
    assert [(line.measured, line.met) for line in train] == [(1.7, False), (0.9, True), (1.06, True), (1.6, False)]
    assert "309.4M params, 128 episodes/step" in train[0].target and "202.5M params" in train[2].target
    assert "--layers 24 --prompts 16" in train[0].source and "21.0 ms per batched turn" in train[0].note
