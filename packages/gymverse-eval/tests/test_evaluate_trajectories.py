"""``gymverse evaluate --trajectories``: every difficulty episode as a `Trajectory` record for ``gymverse view``."""

from __future__ import annotations

import json
from pathlib import Path

from gymverse.evaluate.cli import main as cli_main
from gymverse.trajectory import read_jsonl
from gymverse.viewer import Query, TrajectoryIndex


def test_trajectories_flag_dumps_every_episode_from_the_sandbox(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["game:GuessTheNumber", "--policy", "random,oracle", "--levels", "1,3", "--seeds", "3", "--out", str(out)]
    assert cli_main([*args, "--no-correctness", "--no-diversity", "--workers", "2", "--trajectories"]) == 0
    trajs = list(read_jsonl(out / "trajectories.jsonl"))
    assert len(trajs) == 2 * 2 * 3
    assert sorted((t.metrics["policy"], t.metrics["level"], t.seed) for t in trajs) == sorted(
        (p, lv, s) for p in ("random", "oracle") for lv in (1, 3) for s in range(3)
    )
    assert all(t.env_id == "game:GuessTheNumber" for t in trajs)
    assert all(t.complexity == t.metrics["level"] for t in trajs)
    oracle = [t for t in trajs if t.metrics["policy"] == "oracle"]
    assert all(t.success and t.turns and t.error is None for t in oracle)
    assert all(t.turns[-1].info["success"] is True for t in oracle)
    # the report keeps only outcomes, and its numbers agree with the dumped turns
    report = json.loads((out / "evaluation.json").read_text())
    assert "trajectory" not in json.dumps(report)
    levels = report["envs"][0]["difficulty"]["oracle"]["levels"]
    for lv in levels:
        turns = [len(t.turns) for t in oracle if t.complexity == lv["level"]]
        assert lv["mean_turns"] == sum(turns) / len(turns)
    index = TrajectoryIndex([out])
    assert len(index) == 12
    assert index.query(Query(success=True), 0, 100)["total"] == sum(t.success for t in trajs)


def test_no_trajectories_without_the_flag(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    args = ["game:GuessTheNumber", "--policy", "oracle", "--levels", "1", "--seeds", "1", "--out", str(out)]
    assert cli_main([*args, "--no-correctness", "--no-diversity", "--executor", "inline"]) == 0
    assert not (out / "trajectories.jsonl").exists()
