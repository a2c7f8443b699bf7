"""Known-answer tests on real envs: broken oracle, flat difficulty, duplicates, broken GEM files, HTML, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gymverse.evaluate import (
    SCHEMA_VERSION,
    CorrectnessConfig,
    DifficultyConfig,
    EvaluationConfig,
    EvaluationReport,
    HashingEmbedder,
    evaluate_suite,
    load_suite,
)
from gymverse.evaluate.cli import main as cli_main
from gymverse.evaluate.report import render_html, write_report
from gymverse.evaluate.suites import SuiteError

# A code-entry env: type `length` digits; one wrong digit ends the episode. OFFSET breaks the oracle on purpose.
CODE_ENV = r'''
"""Enter a hidden code one digit per turn."""
import re
from gymverse.actions import ActionFormatError
from gymverse.core import Env, EnvMetadata, StepResult


class CodeEntry(Env):
    metadata = EnvMetadata(name="CodeEntry", family="test", domain="DOMAIN", description="DESCRIPTION", max_turns=40)
    complexity_params = {"length": LENGTH, "padding": (1, 10)}

    def _reset(self):
        self.code = [int(self.rng.integers(0, 10)) for _ in range(self.params["length"])]
        self.pos = 0
        pad = "." * self.params["padding"]
        return f"Enter {len(self.code)} digits, one per turn, as \\boxed{{d}}. Code: {self.code} {pad}", {}

    def _step(self, action):
        m = re.search(r"\\boxed\{(\d+)\}", action)
        if m is None:
            raise ActionFormatError("expected \\boxed{digit}")
        if int(m.group(1)) != self.code[self.pos]:
            return StepResult("wrong digit", 0.0, True, False, {"success": False})
        self.pos += 1
        done = self.pos == len(self.code)
        return StepResult("ok", 1.0 if done else 0.0, done, False, {"success": True} if done else {})

    def solve(self):
        return "\\boxed{%d}" % ((self.code[self.pos] + OFFSET) % 10)

    def sample_random_action(self):
        return "\\boxed{%d}" % int(self.rng.integers(0, 10))
'''

GEM_OK = r'''
"""Say yes to win."""
from gem.core import Env


class SayYes(Env):
    def reset(self, seed=None):
        super().reset(seed)
        return "Say \\boxed{yes}.", {}

    def step(self, action):
        ok = "yes" in action
        return "done", 1.0 if ok else 0.0, True, False, {"success": ok}

    def sample_random_action(self):
        return "\\boxed{no}"
'''

GEM_CRASH = r"""
from gem.core import Env


class Crashes(Env):
    def __init__(self):
        raise RuntimeError("constructor exploded")

    def reset(self, seed=None):
        return "", {}

    def step(self, action):
        return "", 0.0, True, False, {}
"""


def write_artifact(root: Path, name: str, *, length: str = "(1, 10)", offset: int = 0, domain: str = "game",
                   description: str = "Type the hidden code digit by digit.") -> Path:  # fmt: skip
    """An artifact directory (env.py + spec.json) built from CODE_ENV."""
    d = root / name
    d.mkdir(parents=True)
    src = CODE_ENV.replace("LENGTH", length).replace("OFFSET", str(offset))
    (d / "env.py").write_text(src.replace("DOMAIN", domain).replace("DESCRIPTION", description))
    spec = {"name": name, "domain": domain, "goal": description, "actions": [{"name": "digit", "syntax": r"\boxed{d}"}]}
    (d / "spec.json").write_text(json.dumps(spec))
    return d


def fast_config(executor: str = "inline", **kw: object) -> EvaluationConfig:
    """Small but real settings: 4 levels x 12 seeds, a reduced checker."""
    kw.setdefault("policies", ("random", "oracle", "noisy:0.3"))
    return EvaluationConfig(
        difficulty=DifficultyConfig(levels=(1, 4, 7, 10), seeds=tuple(range(12)), ks=(1, 5)),
        correctness=CorrectnessConfig(
            checker_levels=(1, 10), checker_seeds=(0,), oracle_seeds=(0,), degeneracy_seeds=tuple(range(4))
        ),
        executor=executor,
        workers=2,
        embedder=HashingEmbedder(),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def synth_report(tmp_path_factory: pytest.TempPathFactory) -> EvaluationReport:
    """One evaluation of a suite with a good env, a broken oracle, a flat env and an exact duplicate."""
    root = tmp_path_factory.mktemp("suite")
    write_artifact(root, "good")
    write_artifact(root, "good_copy")
    write_artifact(root, "bad_oracle", offset=1, description="Enter the secret digits one at a time.")
    write_artifact(root, "flat", length="(3, 3)", description="Digits code whose level only pads the text.")
    (root / "no_program").mkdir()
    (root / "no_program" / "spec.json").write_text("{}")
    return evaluate_suite(load_suite(str(root)), fast_config())


def test_good_env_is_correct_with_falling_difficulty(synth_report: EvaluationReport) -> None:
    good = synth_report.env("synth:good")
    assert good.correctness.verdict == "correct", good.correctness.reasons
    assert good.reference_policy == "noisy:0.3"
    assert good.slope is not None
    assert good.slope < -0.03
    assert good.spearman is not None
    assert good.spearman < -0.8
    assert "flat_difficulty" not in good.flags
    oracle = good.difficulty["oracle"]
    assert [lv.rate for lv in oracle.levels] == [1.0, 1.0, 1.0, 1.0]
    assert oracle.levels[0].pass_at_k["5"] == 1.0
    assert all(lv.rate == 0.0 for lv in good.difficulty["random"].levels[1:])  # 10^-4 and worse


def test_broken_oracle_is_marked_incorrect(synth_report: EvaluationReport) -> None:
    bad = synth_report.env("synth:bad_oracle")
    assert bad.correctness.verdict == "incorrect"
    assert any(r.startswith("oracle does not solve level(s) 1, 2, 3") for r in bad.correctness.reasons)
    assert "oracle" in bad.correctness.checker["failed"]
    assert all(lv.rate == 0.0 for lv in bad.difficulty["oracle"].levels)
    assert "incorrect" in bad.flags


def test_levels_that_do_not_change_difficulty_give_slope_zero_and_a_flag(synth_report: EvaluationReport) -> None:
    flat = synth_report.env("synth:flat")
    rates = [lv.rate for lv in flat.difficulty["noisy:0.3"].levels]
    assert 0.0 < rates[0] < 1.0
    assert flat.slope == pytest.approx(0.0, abs=1e-9)
    assert "flat_difficulty" in flat.flags
    assert synth_report.summary["flagged"]["synth:flat"] == flat.flags


def test_duplicates_are_flagged_and_missing_programs_reported(synth_report: EvaluationReport) -> None:
    div = synth_report.diversity
    assert div is not None
    exact = [d for d in div.near_duplicates if {d["a"], d["b"]} == {"synth:good", "synth:good_copy"}]
    assert {d["kind"] for d in exact} >= {"program", "description", "ast"}
    assert "near_duplicate" in synth_report.env("synth:good_copy").flags
    broken = synth_report.env("synth:no_program")
    assert broken.correctness.verdict == "error"
    assert "no env.py" in broken.correctness.reasons[0]


def test_json_written_by_the_run_round_trips(synth_report: EvaluationReport, tmp_path: Path) -> None:
    json_path, html_path = write_report(synth_report, tmp_path)
    loaded = EvaluationReport.load(json_path)
    assert loaded.to_dict() == json.loads(json_path.read_text())
    assert loaded.env("synth:flat").slope == synth_report.env("synth:flat").slope
    text = html_path.read_text()
    assert text.count("<svg") >= 2  # success curves + diversity map
    assert '<table class="correctness">' in text
    assert "oracle does not solve level(s)" in text
    assert not re.search(r"(src|href)=[\"']?(https?:|//)|<link|<script", text)  # self-contained


def test_gem_file_with_a_crashing_constructor_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "say_yes.py").write_text(GEM_OK)
    (tmp_path / "crashes.py").write_text(GEM_CRASH)
    suite = load_suite(str(tmp_path))
    assert sorted(e.kind for e in suite.entries) == ["gem", "gem"]
    report = evaluate_suite(suite, fast_config(run_diversity=False))
    crashed = report.env("gem:crashes")
    assert crashed.correctness.verdict == "error"
    assert "constructor exploded" in crashed.correctness.reasons[0]
    trivial = report.env("gem:say_yes")  # runs, but a constant "yes" always wins and no level reaches it
    assert trivial.correctness.verdict == "incorrect"
    assert any("constant answer \\boxed{yes} wins 8/8 episodes" in r for r in trivial.correctness.reasons)
    assert any("complexity never reaches the env" in r for r in trivial.correctness.reasons)
    assert all(lv.rate == 0.0 for lv in trivial.difficulty["random"].levels)
    assert "oracle" not in trivial.difficulty  # no solve(): oracle-based policies are not run


def test_bad_suite_specs_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="unknown suite 'nosuchfamily'"):
        load_suite("nosuchfamily")
    with pytest.raises(SuiteError, match="no such file"):
        load_suite(str(tmp_path / "missing.py"))
    with pytest.raises(SuiteError, match="no environments"):
        load_suite(str(tmp_path))


def test_cli_runs_on_a_two_env_suite_in_the_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["game:GuessTheNumber,logic:Nonogram", "--levels", "1,5,10", "--seeds", "3", "--out", str(out)]
    code = cli_main([*args, "--embedder", "hashing", "--workers", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "report:" in printed
    assert "game:GuessTheNumber" in printed
    data = json.loads((out / "evaluation.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["run"]["seeds"] == [0, 1, 2]
    assert data["run"]["executor"] == "sandbox"
    assert [e["name"] for e in data["envs"]] == ["game:GuessTheNumber", "logic:Nonogram"]
    assert all(e["correctness"]["verdict"] == "correct" for e in data["envs"])
    assert (out / "report.html").read_text().count("<svg") >= 2


def test_cli_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["nosuchfamily", "--out", "/nonexistent/x"]) == 2
    assert "unknown suite" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["--policy", "greedy"])
    assert "unknown policy 'greedy'" in capsys.readouterr().err


def test_html_escapes_env_text(synth_report: EvaluationReport) -> None:
    report = EvaluationReport.from_dict(synth_report.to_dict())
    report.envs, report.diversity = report.envs[:1], None  # keep it cheap: one small plot
    report.envs[0].correctness.reasons = ["<script>alert(1)</script>"]
    assert "<script>alert" not in render_html(report)


def test_sandboxed_run_ships_artifact_files_and_survives_a_hanging_env(tmp_path: Path) -> None:
    write_artifact(tmp_path, "good")
    (tmp_path / "hangs").mkdir()
    (tmp_path / "hangs" / "env.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    cfg = fast_config("sandbox", run_diversity=False)
    cfg.correctness = CorrectnessConfig(checker_levels=(1,), checker_seeds=(0,), oracle_seeds=(0,),
                                        degeneracy_levels=(5,), degeneracy_seeds=(0,), timeout=4.0)  # fmt: skip
    cfg.difficulty = DifficultyConfig(levels=(1, 10), seeds=(0, 1, 2), timeout=30.0)
    report = evaluate_suite(load_suite(str(tmp_path)), cfg)
    assert report.run["executor"] == "sandbox"
    assert report.env("synth:good").correctness.verdict == "correct"
    hung = report.env("synth:hangs")
    assert hung.correctness.verdict == "error"
    assert "did not finish within" in hung.correctness.reasons[0]  # its deadline, kept by the trusted side
    assert all(pd.error and "cannot be built" in pd.error for pd in hung.difficulty.values())


def test_llm_policy_and_rubric_judge_through_an_openai_compatible_server(tmp_path: Path) -> None:
    from gymverse_synth.llm import OpenAIClient
    from gymverse_synth.testing.scripted_server import RecordedRequest, ScriptedLLMServer

    def reply(req: RecordedRequest) -> str:
        msgs = req.messages
        if msgs[0]["content"].startswith("You review"):
            broken = "+ 1) % 10" in msgs[-1]["content"]
            return json.dumps({"verdict": "fail" if broken else "pass", "score": 2, "issues": ["oracle adds 1"]})
        # type the code shown in the first observation, if the history window still contains it
        for i, m in enumerate(msgs):
            found = re.search(r"Code: \[([\d, ]*)\]", m["content"])
            if m["role"] == "user" and found:
                code = [int(d) for d in found.group(1).split(",")]
                typed = sum(1 for later in msgs[i:] if later["role"] == "assistant")
                return f"I will type \\boxed{{{code[typed]}}}"
        return "I forgot the code, so \\boxed{x}"

    write_artifact(tmp_path, "good")
    write_artifact(tmp_path, "bad_oracle", offset=1)
    with ScriptedLLMServer(handler=reply) as server:
        client = OpenAIClient(server.base_url, "scripted")
        cfg = fast_config(policies=("llm",), llm=client, llm_policy_options={"history_window": 4}, run_diversity=False)
        cfg.difficulty = DifficultyConfig(levels=(1, 4, 7, 10), seeds=(0, 1, 2))
        report = evaluate_suite(load_suite(str(tmp_path)), cfg)
    good = report.env("synth:good")
    rates = [lv.rate for lv in good.difficulty["llm"].levels]
    # length == level: with 4 exchanges of history the code scrolls out of view after the 5th digit
    assert rates[:2] == [1.0, 1.0]
    assert rates[3] == 0.0
    assert good.reference_policy == "llm"
    assert good.correctness.rubric == {"verdict": "pass", "score": 2.0, "issues": ["oracle adds 1"]}
    bad = report.env("synth:bad_oracle")
    assert bad.correctness.rubric is not None
    assert bad.correctness.rubric["verdict"] == "fail"
    assert any(r.startswith("rubric judge: program does not match its spec") for r in bad.correctness.reasons)
    assert report.run["llm_model"] == "scripted"


def test_process_executor_times_out_a_hanging_env_and_runs_the_rest(tmp_path: Path) -> None:
    write_artifact(tmp_path, "good")
    hang = "import time\nfrom gymverse.core import Env\n\n\nclass Hangs(Env):\n    def _reset(self): ...\n\n"
    hang += "    def _step(self, action): ...\n\n\nwhile True:\n    time.sleep(1)\n"
    (tmp_path / "hangs.py").write_text(hang)
    cfg = fast_config("process", policies=("oracle",), run_correctness=False, run_diversity=False)
    cfg.difficulty = DifficultyConfig(levels=(3,), seeds=(0, 1), timeout=3.0)
    report = evaluate_suite(load_suite(str(tmp_path)), cfg)
    assert report.run["executor"] == "process"
    assert report.env("synth:good").difficulty["oracle"].levels[0].successes == 2
    hung = report.env("file:hangs").difficulty["oracle"]
    assert hung.levels == []
    assert hung.error is not None and "timed out after 3s" in hung.error


def test_same_settings_give_the_same_numbers() -> None:
    def run() -> dict[str, dict[str, list[int]]]:
        cfg = fast_config(policies=("random", "noisy:0.5"), run_correctness=False, run_diversity=False)
        cfg.difficulty = DifficultyConfig(levels=(1, 6), seeds=tuple(range(6)))
        report = evaluate_suite(load_suite("game:GuessTheNumber,logic:Nonogram"), cfg)
        return {e.name: {p: [lv.successes for lv in d.levels] for p, d in e.difficulty.items()} for e in report.envs}

    first = run()
    assert first == run()
    assert first["game:GuessTheNumber"]["noisy:0.5"][0] > 0


def test_core_cli_discovers_evaluate_through_its_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    from gymverse.cli import build_parser
    from gymverse.cli import main as gymverse_main

    subparsers = build_parser()._subparsers
    assert subparsers is not None
    choices = subparsers._group_actions[0].choices
    assert choices is not None and "evaluate" in choices
    assert gymverse_main(["evaluate", "nosuchfamily"]) == 2
    assert "unknown suite 'nosuchfamily'" in capsys.readouterr().err
