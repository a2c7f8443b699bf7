"""A GEM-style corpus as LLMs write it (tests/gem_corpus): each planted defect is flagged, no control is.

The files follow the conventions of LLM-synthesized GEM envs: ``from gem.core import Env``, a base env plus a
``...WithFeedback`` subclass, complexity by constructor keyword, attribute or ``evolve``, success only by reward
(1 win, -1 wrong, ``LanguageGameReward.format_error_reward``), no ``solve()``, and a helper file that is no env.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gymverse.evaluate import EvaluationConfig, EvaluationReport, HashingEmbedder, evaluate_suite, load_suite
from gymverse.evaluate.suites import FileOptions

CORPUS = Path(__file__).parent / "gem_corpus"
CONTROLS = ("gem:clue_court", "gem:number_hunt", "gem:parity_check")
#: file -> (flag, words of the reason) for the one defect planted in it.
DEFECTS = {
    "gem:inventory_pick": ("crash", "reset crashes on"),
    "gem:lottery_draw": ("hang", "reset hangs at level 10 seed"),
    "gem:balance_scale": ("degenerate_constant", "constant answer \\boxed{answer 0} wins 8/8 episodes at level 1"),
    "gem:digit_sum_quiz": ("accepts_wrong_answers", "accepts wrong answers"),
    "gem:token_sorter": ("complexity_noop_runtime", "complexity no-op on the training path"),
    "gem:unit_convert": ("crash", "step crashes on \\boxed{yes}"),
    "gem:word_chain": ("reward_range", "reward -1 outside the declared range (0, 1)"),
    "gem:clue_tribunal": ("near_duplicate", None),
    "gem:host_report": ("unsafe", "reads the file /etc/passwd"),
    "gem:sensor_log": ("incorrect", "first reset info differs between two instances: at [1]['generated_at']"),
}
#: good envs with a quality problem: file -> the warning (never `incorrect`).
WARNED = {"gem:vault_code": "sampler_leaks_answer", "gem:parity_check": "guessable_answer"}
ERRORS = {
    "gem:py312_fstring": "needs Python >= 3.12: line 14 uses an f-string with nested quotes",
    "gem:needs_package": "needs the package 'textarena', which is not installed",
}


@pytest.fixture(scope="module")
def report() -> EvaluationReport:
    # default settings (sandbox executor, default probes and deadlines), only the embedder is the cheap one
    return evaluate_suite(load_suite(str(CORPUS)), EvaluationConfig(embedder=HashingEmbedder()))


def test_every_file_loads_and_the_helper_is_skipped_with_a_note() -> None:
    suite = load_suite(str(CORPUS))
    assert suite.skipped == ["skipped helpers.py: not an environment (no class with reset() and step())"]
    assert {e.name for e in suite.entries} == {*CONTROLS, *DEFECTS, *ERRORS, *WARNED}
    every = load_suite(str(CORPUS), FileOptions(all_classes=True)).names()
    assert "gem:clue_court:ClueCourtEnvWithFeedback" in every
    assert "gem:number_hunt:NumberHuntEnvWithFeedback" in every
    picked = load_suite(str(CORPUS / "clue_court.py"), FileOptions(class_name="ClueCourtEnvWithFeedback"))
    assert picked.entries[0].ref.endswith("clue_court.py:ClueCourtEnvWithFeedback")


def test_controls_are_not_flagged(report: EvaluationReport) -> None:
    for name in CONTROLS:
        ev = report.env(name)
        assert ev.correctness.verdict == "unverified", (name, ev.correctness.reasons)  # no oracle, nothing wrong
        assert ev.correctness.reasons == [], name
        # a warning (a guessable two-way choice at level 1) is allowed on a good env; a defect is not
        warned = {f["code"] for f in ev.correctness.findings if f["severity"] == "warning"}
        assert set(ev.flags) <= warned, (name, ev.flags)
        assert "success rule: reward>=1 (inferred from the rewards step() returns)" in ev.correctness.notes
        assert ev.correctness.probes["complexity"]["fresh"] and ev.correctness.probes["complexity"]["runtime"]
        assert ev.reference_policy == "random" and ev.slope is not None and ev.slope < 0
    knobs = {n: report.env(n).correctness.probes["complexity"]["knob"] for n in CONTROLS}
    assert knobs == {"gem:clue_court": "kwarg", "gem:number_hunt": "method:evolve", "gem:parity_check": "attribute"}
    assert report.env("gem:word_chain").correctness.probes["reward_range"] == [0.0, 1.0]  # declared, not core's


def test_each_planted_defect_is_flagged_with_its_reason(report: EvaluationReport) -> None:
    for name, (flag, words) in DEFECTS.items():
        ev = report.env(name)
        assert flag in ev.flags, (name, ev.flags, ev.correctness.reasons)
        if words is not None:
            assert any(words in r for r in ev.correctness.reasons), (name, ev.correctness.reasons)
    for name, words in ERRORS.items():
        ev = report.env(name)
        assert ev.correctness.verdict == "error"
        assert len(ev.correctness.reasons) == 1 and words in ev.correctness.reasons[0], ev.correctness.reasons


def test_seed_and_level_are_named_and_hangs_stay_bounded(report: EvaluationReport) -> None:
    crashes = [r for r in report.env("gem:inventory_pick").correctness.reasons if "reset crashes" in r]
    assert any("/64 seeds at level 10 (first: seed 1)" in r for r in crashes), crashes
    assert all("Sample larger than population" in r for r in crashes)
    hang = report.env("gem:lottery_draw")
    assert any("did not finish within 1s" in r for r in hang.correctness.reasons)
    assert hang.difficulty["random"].rate_at(1) is not None  # its other levels were still evaluated
    assert report.env("gem:token_sorter").correctness.probes["complexity"]["fresh"] is True


def test_random_actions_that_do_not_exist_are_said_so(report: EvaluationReport) -> None:
    notes = report.env("gem:unit_convert").correctness.notes
    assert any("sample_random_action() is not implemented" in n for n in notes)


def test_only_the_later_twin_is_a_near_duplicate_and_it_names_the_first(report: EvaluationReport) -> None:
    assert "near_duplicate" not in report.env("gem:clue_court").flags
    assert (
        "near-duplicate of gem:clue_court (listed first in the suite)"
        in report.env("gem:clue_tribunal").correctness.notes
    )
    flagged = [e.name for e in report.envs if "near_duplicate" in e.flags]
    assert flagged == ["gem:clue_tribunal"]


def test_a_given_success_rule_is_used_and_reported(tmp_path: Path) -> None:
    suite = load_suite(str(CORPUS / "number_hunt.py"), FileOptions(success_rule="reward>=2"))
    assert suite.entries[0].ref.endswith("number_hunt.py|reward>=2")
    from gymverse.evaluate.suites import build_env

    env = build_env(suite.entries[0].ref, 1)
    assert env.success_rule == "reward>=2"  # type: ignore[attr-defined]


def test_cli_notes_skipped_files_and_rejects_a_bad_success_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gymverse.evaluate.cli import main

    suite = f"{CORPUS / 'helpers.py'},{CORPUS / 'number_hunt.py'}"
    args = [suite, "--executor", "inline", "--no-diversity", "--levels", "1,10", "--seeds", "2", "--out", str(tmp_path)]
    main([*args, "--success-rule", "reward>=1", "--all-classes"])
    captured = capsys.readouterr()
    assert "skipped helpers.py: not an environment (no class with reset() and step())" in captured.err
    assert "gem:number_hunt:NumberHuntEnvWithFeedback" in captured.out
    report = EvaluationReport.load(tmp_path / "evaluation.json")
    assert "success rule: reward>=1 (given)" in report.env("gem:number_hunt").correctness.notes
    with pytest.raises(SystemExit):
        main([*args, "--success-rule", "reward~1"])
    assert "bad success rule 'reward~1'" in capsys.readouterr().err


def test_quality_warnings_are_apart_from_defects_with_their_evidence(report: EvaluationReport) -> None:
    for name, code in WARNED.items():
        ev = report.env(name)
        assert ev.correctness.verdict == "unverified", (name, ev.correctness.reasons)
        found = [f for f in ev.correctness.findings if f["code"] == code]
        assert found and found[0]["severity"] == "warning", (name, ev.correctness.findings)
        assert found[0]["evidence"]["level"] in (1, 3, 5, 7, 10) and found[0]["evidence"]["n"] >= 8
        assert found[0]["message"] in ev.correctness.warnings and found[0]["message"] not in ev.correctness.reasons
    leak = next(f for f in report.env("gem:vault_code").correctness.findings if f["code"] == "sampler_leaks_answer")
    assert leak["evidence"]["visible_best"] == 0.0  # no answer a model could write wins: the sampler reads state
    coin = next(f for f in report.env("gem:parity_check").correctness.findings if f["code"] == "guessable_answer")
    assert coin["evidence"]["n"] == 32 and coin["evidence"]["action"] in ("\\boxed{yes}", "\\boxed{no}")


def test_an_env_that_reaches_outside_is_unsafe_with_its_attempts(report: EvaluationReport) -> None:
    ev = report.env("gem:host_report")
    assert ev.correctness.verdict == "incorrect" and "unsafe" in ev.flags
    unsafe = next(f for f in ev.correctness.findings if f["code"] == "unsafe")
    attempts = {(a["kind"], a["detail"]) for a in unsafe["evidence"]["attempts"]}
    assert {("read_file", "/etc/passwd"), ("read_environ", "USER")} <= attempts
    assert ("write_file", "/var/tmp/host_report_cache.txt") in attempts
    assert any(k == "socket" and "22" in d for k, d in attempts)
    for name in CONTROLS:  # the host's own imports and bookkeeping never count
        assert "unsafe" not in report.env(name).flags


def test_the_evaluation_writes_a_manifest_of_the_passing_safe_envs(report: EvaluationReport, tmp_path: Path) -> None:
    from gymverse.evaluate.report import write_report
    from gymverse.manifest import read_manifest, split_ref

    write_report(report, tmp_path)
    paths = [Path(split_ref(r)[1]) for r in read_manifest(tmp_path / "manifest.json")]
    passing = {n.removeprefix("gem:") for n in (*CONTROLS, *WARNED, "gem:clue_tribunal")}  # a twin still passes
    assert {p.stem for p in paths} == passing  # no defect, no error, nothing unsafe
    assert all(p.is_absolute() and p.is_file() for p in paths)
