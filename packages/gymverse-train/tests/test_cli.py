"""``gymverse train`` end to end through the core CLI (entry point group ``gymverse.cli``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gymverse.cli import main
from gymverse.trajectory import read_jsonl


def test_cli_trains_two_steps_end_to_end(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "run"
    argv = ["train", "--model", str(model_dir), "--envs", "demo:EchoTarget,game:GuessTheNumber", "--steps", "2"]
    argv += ["--prompts", "1", "--group-size", "2", "--max-turns", "2", "--max-new-tokens", "6", "--evolve"]
    argv += ["--threads", "1", "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "step 2: success" in err and "eta" in err  # one progress line per step off a terminal
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("success_by_env", "complexity_by_env", "return", "adv_std", "tokens_per_s", "step_s"):
        assert key in metrics[-1]
    assert set(metrics[-1]["complexity_by_env"]) == {"demo:EchoTarget", "game:GuessTheNumber"}
    rows = list(read_jsonl(out / "trajectories.jsonl"))
    assert len(rows) == 8 and {r.metrics["step"] for r in rows} == {1, 2}
    assert all(t.advantage is not None for r in rows for t in r.turns)
    assert (out / "training.png").stat().st_size > 1000
    assert "data:image/png;base64" in (out / "summary.html").read_text()
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] == 2 and state["curriculum"]["controller"]
    # the viewer reads the run directory
    page = tmp_path / "view.html"
    assert main(["view", str(out), "--export", str(page)]) == 0
    assert "EchoTarget" in page.read_text()
    # resume extends the same run
    assert main([*argv, "--resume", "--steps", "3"]) == 0
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3


def test_cli_bad_usage_exits_2(model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    assert main(["train", "--model", str(model_dir), "--envs", "nope:Missing", "--out", str(tmp_path / "x")]) == 2
    assert "nope:Missing" in capsys.readouterr().err
    assert main(["train", "--model", str(tmp_path / "absent"), "--out", str(tmp_path / "y")]) == 2
    assert "config.json" in capsys.readouterr().err
    assert main(["train", "--resume", "--out", str(tmp_path / "z")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["train", "--algo", "grpo", "--group-size", "1", "--out", str(tmp_path / "w")]) == 2
    assert "group-size" in capsys.readouterr().err
    # the start complexity is --complexity, as for `gymverse play` and make-dataset (it was --level)
    assert main(["train", "--complexity", "11", "--out", str(tmp_path / "v")]) == 2
    assert "--complexity: complexity must be an integer in 1..10, got '11'" in capsys.readouterr().err
    assert main(["train", "--level", "3", "--out", str(tmp_path / "u")]) == 2
    assert "unrecognized arguments: --level" in capsys.readouterr().err
