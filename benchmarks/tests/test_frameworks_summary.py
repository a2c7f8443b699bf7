"""`run_all`'s summary writer and runner on fixture results (never on timings: the numbers here are made up)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import run_all
from summary import RunRecord, paired_ratio, with_ratios, write_summary

ROOT = Path(__file__).resolve().parents[2]
CPU = {"platform": "Linux-test", "processor": "x86_64", "cpus": 2, "python": "3.11.7", "load_avg_1m": 1.0}


def result(name: str, rows: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "benchmark": name,
        "title": f"{name} title",
        "machine": dict(CPU),
        "args": {"quick": True, "rounds": None},
        "rows": rows,
        "plot": {"metric": "ms_per_turn", "label": "ms per turn", "lower_is_better": True},
        "targets": [],
    }
    doc.update(extra)
    return doc


def write(folder: Path, doc: dict[str, Any]) -> None:
    (folder / f"{doc['benchmark']}.json").write_text(json.dumps(doc))


def table_row(md: str, *cells: str) -> str:
    """The one Markdown table line that contains all `cells` as cells."""
    lines = [line for line in md.splitlines() if all(f"| {c} |" in line for c in cells)]
    assert len(lines) == 1, (cells, lines)
    return lines[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rollout = result(
        "verl_rollout",
        [
            # per-round ratios 1, 3, 0.5 -> median 1.0, although the medians' ratio is 20 / 10 = 2.0
            {"framework": "verl", "case": "64 episodes", "arm": "native", "ms_per_turn": 10.0,
             "ms_per_turn_rounds": [10.0, 10.0, 40.0]},
            {"framework": "verl", "case": "64 episodes", "arm": "gymverse", "ms_per_turn": 20.0,
             "ms_per_turn_rounds": [10.0, 30.0, 20.0]},
            # no rounds: the ratio of the medians
            {"framework": "verl", "case": "8 episodes", "arm": "native", "ms_per_turn": 4.0},
            {"framework": "verl", "case": "8 episodes", "arm": "gymverse", "ms_per_turn": 5.0},
        ],
        baseline="native",
        targets=[
            {"name": "overhead per turn at 64", "value": 7.5, "limit": 5.0, "unit": "% <=", "met": False,
             "note": "the scripted generator makes the env layer the whole turn"},
            {"name": "PERPO within 2x GRPO", "value": 1.4, "limit": 2.0, "unit": "x <=", "met": True, "note": ""},
        ],
    )  # fmt: skip
    advantage = result(
        "oat_advantage",
        [{"framework": "oat", "case": "4k", "arm": "perpo", "ms_per_turn": 3.0, "vs grpo": 1.25,
          "ratio_vs_native": 0.5}],
        gpu="skipped: no CUDA device",
    )  # fmt: skip
    folder = tmp_path / "results"
    folder.mkdir()
    write(folder, rollout)
    write(folder, advantage)
    (folder / "env_throughput.json").write_text(json.dumps({"machine": {}, "steps_per_s": {}}))  # not our schema
    (folder / "broken.json").write_text("{not json")
    return folder


def test_missed_target_is_listed_as_missed_and_first(folder: Path) -> None:
    md = write_summary(folder).read_text()
    missed = table_row(md, "verl_rollout", "overhead per turn at 64")
    assert "**MISSED**" in missed
    assert "the scripted generator makes the env layer the whole turn" in missed
    assert "| met |" in table_row(md, "verl_rollout", "PERPO within 2x GRPO")
    targets = md.split("## Targets")[1]
    assert targets.index("overhead per turn at 64") < targets.index("PERPO within 2x GRPO")


def test_ratios_against_the_baseline_are_paired_by_round(folder: Path) -> None:
    md = write_summary(folder).read_text()
    assert table_row(md, "64 episodes", "gymverse").endswith("| 1.00x |")  # median of 1, 3, 0.5; not 2.00x
    assert table_row(md, "8 episodes", "gymverse").endswith("| 1.25x |")  # 5 / 4 without rounds
    assert table_row(md, "64 episodes", "native").endswith("| – |")  # the baseline gets no ratio to itself
    assert table_row(md, "4k", "perpo").endswith("| 1.25x | 0.50x |")  # a row's own ratios are shown as they are


def test_paired_ratio_falls_back_to_medians_on_unequal_rounds() -> None:
    row = {"m": 6.0, "m_rounds": [6.0, 6.0]}
    ref = {"m": 3.0, "m_rounds": [3.0, 3.0, 3.0]}
    assert paired_ratio(row, ref, "m") == 2.0
    assert paired_ratio({"m": 1.0}, {"m": 0.0}, "m") is None


def test_baseline_of_the_same_framework_wins_within_a_case() -> None:
    doc = result(
        "mixed",
        [
            {"framework": "a", "case": "c", "arm": "native", "ms_per_turn": 1.0},
            {"framework": "b", "case": "c", "arm": "native", "ms_per_turn": 4.0},
            {"framework": "b", "case": "c", "arm": "gymverse", "ms_per_turn": 8.0},
        ],
        baseline="native",
    )
    rows = with_ratios(doc)
    assert rows[2]["vs native"] == 2.0
    assert "vs native" not in rows[0]


def test_plots_runs_machine_and_no_gpu(folder: Path) -> None:
    runs = [RunRecord("bench_verl.py", ".venv-verl", "ok", 12.0),
            RunRecord("bench_rl2.py", ".venv-rl2", "not run: .venv-rl2 missing, create it with `uv sync`")]  # fmt: skip
    md = write_summary(folder, runs, gpu_requested=True).read_text()
    for name in ("verl_rollout", "oat_advantage"):
        png = folder / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name}.png)" in md
    assert not (folder / "env_throughput.png").exists()
    assert "not run: .venv-rl2 missing" in table_row(md, "bench_rl2.py")
    gpu = md.split("## GPU")[1].split("## Machines")[0]
    assert "No GPU on this machine" in gpu and "`--gpu` was passed" in gpu
    assert "`oat_advantage.json`: GPU skipped: no CUDA device" in gpu
    assert "Linux-test; x86_64, 2 CPUs, no GPU" in md.split("## Machines")[1]


def test_gpu_rows_are_listed_when_a_gpu_was_used(tmp_path: Path) -> None:
    doc = result(
        "verl_generation",
        [
            {"framework": "verl", "case": "generate (gpu)", "arm": "transformers", "ms_per_turn": 42.0},
            {"framework": "verl", "case": "scripted", "arm": "native", "ms_per_turn": 0.5},
        ],
    )
    doc["machine"]["gpu"] = "NVIDIA H100 80GB HBM3"
    write(tmp_path, doc)
    whole = result("verl_rollout_gpu", [{"framework": "verl", "case": "x8", "arm": "native", "ms_per_turn": 9.0}])
    whole["machine"]["gpu"] = "NVIDIA H100 80GB HBM3"
    write(tmp_path, whole)
    gpu = write_summary(tmp_path).read_text().split("## GPU")[1].split("## Machines")[0]
    assert "`verl_generation.json` on NVIDIA H100 80GB HBM3: 1 GPU row(s)" in gpu
    assert "generate (gpu)" in gpu and "scripted" not in gpu
    assert "`verl_rollout_gpu.json` on NVIDIA H100 80GB HBM3: 1 GPU row(s)" in gpu  # a GPU benchmark: every row
    assert "No GPU on this machine" not in gpu


def test_plan_names_the_missing_venv_and_its_ci_command(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "frameworks").mkdir(parents=True)
    (tmp_path / "benchmarks" / "frameworks" / "bench_verl.py").write_text("")
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text((ROOT / ".ci" / "run").read_text())
    benches = [run_all.Bench("bench_verl.py", ".venv-verl"), run_all.Bench("bench_oat.py", ".venv-oat")]
    (_, verl_why), (_, oat_why) = run_all.plan(tmp_path, benches)
    assert verl_why is not None and verl_why.startswith("not run: .venv-verl missing, create it with `")
    assert "UV_PROJECT_ENVIRONMENT=.venv-verl uv sync" in verl_why and "gymverse-adapter-verl" in verl_why
    assert oat_why == "not run: bench_oat.py is not in benchmarks/frameworks/ yet"
    assert run_all.setup_command(".venv-openrlhf").endswith(
        "--project packages/adapter-openrlhf --extra openrlhf --group test"
    )


def test_run_all_goes_on_after_a_failure_and_exits_nonzero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    frameworks = tmp_path / "benchmarks" / "frameworks"
    frameworks.mkdir(parents=True)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / ".venv" / "bin" / "python")
    (frameworks / "bench_fail.py").write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    ok = result("fixture_ok", [{"framework": "x", "case": "c", "arm": "a", "ms_per_turn": 1.0}])
    (frameworks / "bench_ok.py").write_text(textwrap.dedent(f"""
        import json, pathlib, sys
        assert sys.argv[1:3] == ["--quick", "--out"], sys.argv
        pathlib.Path(sys.argv[3], "fixture_ok.json").write_text(json.dumps({ok!r}))
    """))  # fmt: skip
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    monkeypatch.setattr(run_all, "FRAMEWORKS", frameworks)
    monkeypatch.setattr(
        run_all, "BENCHES", (run_all.Bench("bench_fail.py", ".venv"), run_all.Bench("bench_ok.py", ".venv"))
    )
    monkeypatch.setattr(run_all, "plan", lambda: [(b, None) for b in run_all.BENCHES])
    out = tmp_path / "results"
    assert run_all.main(["--quick", "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "[bench_fail] about to fail" in printed and "[1/2] bench_fail.py in .venv: failed (exit 3)" in printed
    md = (out / "SUMMARY.md").read_text()
    assert "failed (exit 3)" in table_row(md, "bench_fail.py") and "| ok |" in table_row(md, "bench_ok.py")
    assert "## fixture_ok title" in md and "from this run" in md
    assert (out / "ISSUE34_SUMMARY.md").read_text().startswith("# Issue 34 targets")  # not the committed one
