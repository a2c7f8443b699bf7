"""The `gymverse` command: list, play (piped stdin), check (tables, JSON, exit codes) and usage errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import gymverse
import pytest
from gymverse.checker import CheckReport
from gymverse.cli import main

BROKEN_FILE = """
from gymverse.core import StepResult
from gymverse.envs.game.guess_number import GuessTheNumber


class TooGenerous(GuessTheNumber):
    def _step(self, action: str) -> StepResult:
        res = super()._step(action)
        return res._replace(reward=7.5) if res.terminated else res
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"gymverse {gymverse.__version__}"


def test_list_shows_ids_and_params(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "list")
    assert code == 0
    for env_id in gymverse.list_envs():
        assert env_id in out
    assert "upper 10→5000" in out
    assert "Find a hidden integer" in out


def test_list_family_filter_and_unknown_family(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "list", "--family", "game")
    assert code == 0
    assert "game:GuessTheNumber" in out
    assert not any(i in out for i in gymverse.list_envs() if not i.startswith("game:"))
    code, _, err = _run(capsys, "list", "--family", "games")  # an earlier release's spelling: no alias is kept
    assert code == 2 and "unknown family 'games'; did you mean game?" in err
    code, _, err = _run(capsys, "list", "--family", "gamez")
    assert code == 2
    assert err.strip().startswith("gymverse list: error: unknown family 'gamez'; did you mean game? (known families:")
    assert len(err.strip().splitlines()) == 1


def test_play_with_oracle_moves_reaches_success(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _stdin(monkeypatch, "\\boxed{3}\nno box here\n" + ":oracle\n" * 12)
    code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "--complexity", "2", "--seed", "7")
    assert code == 0
    assert "I am thinking of an integer between 1 and" in out
    assert "3 is too" in out
    assert "reward -0.10  (format error)" in out
    assert "oracle plays: \\boxed{" in out
    assert "SUCCESS in" in out


def test_play_is_deterministic_under_a_seed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outs = []
    for _ in range(2):
        _stdin(monkeypatch, ":oracle\n" * 20)
        code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "-c", "10", "-s", "3")
        assert code == 0
        outs.append(out)
    assert outs[0] == outs[1]
    assert "SUCCESS in" in outs[0]


def test_play_stops_at_eof_and_quit(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, "\\boxed{1}\n")
    code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "-c", "10")
    assert code == 0
    assert "end of input after 1 turn; episode not finished" in out  # not "1 turns"
    _stdin(monkeypatch, ":help\n:quit\n\\boxed{1}\n")
    code, out, _ = _run(capsys, "play", "game:GuessTheNumber")
    assert code == 0
    assert "':oracle' lets the oracle move" in out
    assert "quit after 0 turns" in out
    assert "too" not in out  # the action after :quit was never played


def test_play_failure_is_reported(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, "\\boxed{1}\n" * 40)
    code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "-c", "10", "-s", "1")
    assert code == 0
    assert "FAIL: episode truncated after 13 turns" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play", "game:GuessTheNumbr"], "unknown env id 'game:GuessTheNumbr'; did you mean game:GuessTheNumber"),
        (["play", "game:GuessTheNumber", "--complexity", "11"], "complexity must be an integer in 1..10, got '11'"),
        (["play", "game:GuessTheNumber", "--complexity", "0"], "complexity must be an integer in 1..10, got '0'"),
        (["play", "game:GuessTheNumber", "--seed", "1.5"], "seed must be a non-negative integer, got '1.5'"),
        (["play", "game:GuessTheNumber", "--seed", "-3"], "seed must be a non-negative integer, got '-3'"),
        (["check", "game:Nope"], "unknown env id 'game:Nope'"),
        (["check", "game:GuessTheNumber", "--levels", "1,12"], "complexity must be an integer in 1..10, got '12'"),
        (["check", "game:GuessTheNumber", "--seeds", "0,x"], "seed must be a non-negative integer, got 'x'"),
        (["check"], "name env ids to check, or use --builtin, --all or --path FILE"),
        (["check", "--path", "nowhere/env.py"], "no such file"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message in lines[0]
    assert lines[0].startswith("gymverse")


def test_check_passing_env_writes_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "sub" / "report.json"
    code, out, _ = _run(capsys, "check", "game:GuessTheNumber", "--seeds", "0,1", "--json", str(out_file))
    assert code == 0
    assert "✓ 71/71" in out
    assert "1/1 environments passed every check" in out
    doc = json.loads(out_file.read_text())
    assert doc["passed"] is True
    report = CheckReport.from_dict(doc["reports"][0])
    assert report.target == "game:GuessTheNumber"
    assert report.passed
    assert report.meta["seeds"] == [0, 1]


def test_check_failing_file_exits_1_with_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "generous.py"
    path.write_text(BROKEN_FILE)
    code, out, _ = _run(capsys, "check", "game:GuessTheNumber", "--path", str(path), "--levels", "1", "--seeds", "0")
    assert code == 1
    assert "reward_range" in out
    assert "reward 7.5 at turn" in out
    assert "1/2 environments passed every check" in out


def test_check_verbose_lists_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "check", "game:GuessTheNumber", "--levels", "1", "--seeds", "0", "-v")
    assert code == 0
    for name in ("determinism", "global_rng", "wrapper_complexity", "complexity_effect", "malformed_actions"):
        assert name in out


def test_console_script_in_a_subprocess(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("gymverse")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "gymverse.cli"]
    out_file = tmp_path / "r.json"
    proc = subprocess.run(
        [*cmd, "check", "game:GuessTheNumber", "--json", str(out_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "game:GuessTheNumber" in proc.stdout
    assert CheckReport.from_dict(json.loads(out_file.read_text())["reports"][0]).passed


class _Terminal(io.StringIO):
    """Typed input: what a person at a terminal sends."""

    def isatty(self) -> bool:
        return True


def test_play_at_a_terminal_boxes_moves_and_spends_no_turn_on_a_malformed_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", _Terminal("\\boxed{a}\n50\n\\boxed{25}\n:quit\n"))
    code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "-c", "10", "-s", "1")
    assert code == 0
    assert "not played:" in out and "reward -0.10" not in out  # the malformed move cost nothing
    assert "plays: \\boxed{50}" in out and "50 is too" in out  # typed bare, played boxed
    assert "25 is too" in out
    assert "quit after 2 turns" in out


def test_play_at_a_terminal_draws_a_fresh_seed_and_says_how_to_replay(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seeds = set()
    for _ in range(3):
        monkeypatch.setattr(sys, "stdin", _Terminal(":oracle\n" * 20))
        code, out, _ = _run(capsys, "play", "game:GuessTheNumber", "-c", "3")
        assert code == 0 and "SUCCESS in" in out
        seed = out.split("seed=", 1)[1].split()[0]
        assert f"replay this game: gymverse play game:GuessTheNumber -c 3 --seed {seed}" in out
        seeds.add(seed)
    assert len(seeds) == 3
