"""The first hour with the CLI: exit codes that tell the truth, reasons people can act on, no misleading output."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from gymverse.cli import main as gymverse_main
from gymverse.evaluate import SuiteError, load_suite
from gymverse.evaluate.cli import main as evaluate_main
from gymverse_synth import synth_cli
from gymverse_synth.llm import OpenAIClient

FAST = ["--levels", "1,4", "--seeds", "3", "--no-diversity", "--executor", "inline", "--workers", "2"]
SHIPPED = [*FAST[:-3], "process", "--workers", "2"]  # env files travel to worker processes, as in the sandbox

# A counting env whose oracle is off by one: it runs, but the oracle never wins.
BAD_ORACLE = r'''
"""Say the hidden number."""
import re
from gymverse.actions import ActionFormatError
from gymverse.core import Env, EnvMetadata, StepResult


class OffByOne(Env):
    metadata = EnvMetadata(name="OffByOne", family="test", domain="game", description="Say the number.", max_turns=3)
    complexity_params = {"top": (3, 30)}

    def _reset(self):
        self.n = int(self.rng.integers(1, self.params["top"] + 1))
        return f"The number is {self.n}. Say it as \\boxed{{n}}.", {}

    def _step(self, action):
        m = re.search(r"\\boxed\{(\d+)\}", action)
        if m is None:
            raise ActionFormatError("expected \\boxed{n}")
        ok = int(m.group(1)) == self.n
        return StepResult("yes" if ok else "no", 1.0 if ok else 0.0, True, False, {"success": ok})

    def solve(self):
        return "\\boxed{%d}" % (self.n + 1)

    def sample_random_action(self):
        return "\\boxed{%d}" % int(self.rng.integers(1, 40))
'''

RESET_CRASH = BAD_ORACLE.replace("self.n = int(", "raise ValueError('reset exploded'); self.n = int(")


def _env_file(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


def test_evaluate_exit_codes_and_first_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    assert evaluate_main(["game:GuessTheNumber", *FAST, "--out", out]) == 0
    capsys.readouterr()

    (tmp_path / "suite").mkdir()
    _env_file(tmp_path / "suite", "off_by_one.py", BAD_ORACLE)
    broken = _env_file(tmp_path / "suite", "syntax_error.py", "class Oops(:\n    pass\n")
    code = evaluate_main([f"game:GuessTheNumber,{tmp_path / 'suite'}", *SHIPPED, "--out", out])
    text = capsys.readouterr().out
    assert code == 1  # linters and test runners: a failing env fails the command
    lines = text.splitlines()
    reason_of = {
        n: next((ln for ln in lines if ln.startswith(f"file:{n} ")), "") for n in ("off_by_one", "syntax_error")
    }
    assert "incorrect: " in reason_of["off_by_one"]
    assert "oracle did not succeed: terminated after 1 step with" in reason_of["off_by_one"]  # not "1 steps"
    assert f"error: {broken}" in reason_of["syntax_error"]  # the user's file, not a sandbox copy
    assert "syntax error" in reason_of["syntax_error"]
    assert not any(ln.startswith("game:GuessTheNumber ") for ln in lines)  # a correct env has no reason line
    assert "(2 failing)" in text

    assert evaluate_main([str(tmp_path / "suite"), *FAST, "--out", out, "--no-fail"]) == 0  # reports only
    capsys.readouterr()
    assert gymverse_main(["evaluate", "--levels", "0", str(tmp_path / "suite")]) == 2  # usage errors
    assert gymverse_main(["evaluate", str(tmp_path / "nothing-here.py")]) == 2


def test_an_env_that_never_runs_has_no_difficulty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _env_file(tmp_path, "crash_reset.py", RESET_CRASH)
    code = evaluate_main([str(path), *FAST, "--out", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert code == 1
    row = next(ln for ln in text.splitlines() if "file:crash_reset" in ln and "│" in ln)
    assert "hard" not in row and "+0.000" not in row  # not bucketed hard with a flat slope
    assert "none" in row and "no_difficulty" in row
    from gymverse.evaluate.schema import EvaluationReport

    ev = EvaluationReport.load(tmp_path / "out" / "evaluation.json").envs[0]
    assert ev.bucket is None and ev.slope is None and ev.reference_policy is None


def test_reasons_name_the_users_file_not_the_sandbox_copy(tmp_path: Path) -> None:
    from gymverse.evaluate.suites import user_paths

    path = _env_file(tmp_path, "mine.py", BAD_ORACLE)
    entry = load_suite(str(path)).entries[0]
    shipped = 'File "/tmp/gymverse-job-x1y2/mine.py", line 3: mine.py: boom (not notmine.py)'
    assert user_paths(entry, shipped) == f'File "{path}", line 3: {path}: boom (not notmine.py)'


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_synth_with_an_unreachable_llm_prints_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(synth_cli, "_client", lambda args: OpenAIClient(args.llm, "m", max_retries=0))
    code = gymverse_main(["synth", "--domain", "logic", "--n", "1", "--llm", url, "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 1  # a rerun resumes it
    assert "error at abstraction: llm: connection error: " in out
    assert "(0 accepted envs)" in out and "seeds with 0 repair rounds" in out
    assert "(s)" not in out and "1 envs" not in out


def test_synth_help_does_not_ask_for_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert gymverse_main(["synth", "--help"]) == 0
    text = capsys.readouterr().out
    usage = text.split("\n\n")[0]
    assert usage.startswith("usage: gymverse synth (--domain DOMAIN")
    assert "optional subcommand" in text
    assert "game, algorithm, logic, tool-use" in " ".join(text.split())


def test_old_family_ids_name_the_current_ones_and_domain_words_still_select_envs() -> None:
    assert load_suite("game:Mastermind").names() == ["game:Mastermind"]
    with pytest.raises(SuiteError, match=r"unknown suite 'games'; did you mean game[,?]"):
        load_suite("games")
    with pytest.raises(SuiteError, match=r"unknown suite 'games:Mastermind'; did you mean game:Mastermind[,?]"):
        load_suite("games:Mastermind")
    # --domain takes the domain in words (the LLM's prompt), not a family id: any spelling of the words works
    assert synth_cli.domain_seeds("Tool use", 1)[0].payload["env_id"].startswith("tool-use:")


def test_evaluate_plays_an_llm_policy_through_synths_registered_client(tmp_path: Path) -> None:
    import json

    from gymverse_synth.testing.scripted_server import RecordedRequest, ScriptedLLMServer

    def reply(req: RecordedRequest) -> str:
        return r"\boxed{5}"

    out = tmp_path / "ev"
    with ScriptedLLMServer(handler=reply) as server:
        argv = ["evaluate", "game:GuessTheNumber", "--llm", server.base_url, "--model", "scripted", "--policy", "llm"]
        code = gymverse_main([*argv, *FAST, "--no-correctness", "--out", str(out)])
        asked = len(server.requests)
    assert code == 0
    assert asked > 0  # gymverse-eval built synth's OpenAI client from the entry point and played through it
    env = json.loads((out / "evaluation.json").read_text())["envs"][0]
    assert "llm" in env["difficulty"]
