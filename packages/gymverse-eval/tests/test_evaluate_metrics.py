"""Known-answer tests of the evaluation math: pass@k, slope/Spearman, flags, Vendi, structure, schema, rubric."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from gymverse.evaluate import difficulty as D
from gymverse.evaluate.correctness import parse_rubric, verdict
from gymverse.evaluate.diversity import (
    ast_ngrams,
    cosine_matrix,
    jaccard_distance,
    mean_pairwise_distance,
    pca_2d,
    profile_similarity,
    vendi_score,
)
from gymverse.evaluate.passk import (
    least_squares_slope,
    pass_at_k,
    pass_at_k_enumerate,
    pass_at_k_exact,
    spearman,
)
from gymverse.evaluate.schema import (
    Correctness,
    DiversityResult,
    EnvEvaluation,
    EvaluationReport,
    LevelResult,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(("n", "c", "k"), [(10, 0, 1), (10, 3, 1), (10, 3, 5), (10, 7, 4), (1, 1, 1), (200, 17, 50)])
def test_pass_at_k_matches_closed_form(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_at_1_is_the_success_rate_and_is_unbiased_unlike_the_plugin() -> None:
    assert pass_at_k(20, 5, 1) == pytest.approx(0.25)
    # plug-in 1-(1-p)^k overestimates: with 2/4 successes, any 3 of the 4 attempts contain a success
    assert pass_at_k(4, 2, 3) == 1.0
    assert 1 - (1 - 0.5) ** 3 < 1.0


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.integers(1, 9))
def test_pass_at_k_equals_brute_force_enumeration(outcomes: list[bool], k: int) -> None:
    k = min(k, len(outcomes))
    n, c = len(outcomes), sum(outcomes)
    assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_enumerate(outcomes, k), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_exact(n, c, k), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n() -> None:
    # math.comb(5000, 2500) has ~1500 digits: the product form must still give a finite, exact-enough answer
    assert pass_at_k(5000, 1, 2500) == pytest.approx(0.5, abs=1e-9)
    assert 0.0 <= pass_at_k(100000, 3, 10) <= 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=r"n=|k must|successes"):
        pass_at_k(n, c, k)


def test_slope_and_spearman_known_answers() -> None:
    assert least_squares_slope([1, 2, 3], [1.0, 0.5, 0.0]) == pytest.approx(-0.5)
    assert least_squares_slope([1, 1], [0.0, 1.0]) is None
    assert spearman([1, 2, 3, 4], [0.9, 0.5, 0.4, 0.1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [0.1, 0.3, 0.2, 0.4]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [0.5, 0.5, 0.5]) is None  # constant curve: rho undefined, not 0
    # ties get average ranks: compare with the Pearson correlation of hand-computed ranks
    rx, ry = np.array([1, 2, 3, 4.0]), np.array([1.5, 1.5, 3, 4])
    expected = float(np.corrcoef(rx, ry)[0, 1])
    assert spearman([1, 2, 3, 4], [0.0, 0.0, 0.5, 1.0]) == pytest.approx(expected)


def _curve(rates: list[float], levels: tuple[int, ...] = (1, 4, 7, 10), n: int = 10) -> D.PolicyDifficulty:
    eps = [[{"success": i < round(r * n), "turns": 1} for i in range(n)] for r in rates]
    return D.policy_difficulty("noisy:0.3", [D.level_result(lv, e, (1, 5)) for lv, e in zip(levels, eps)])


def test_flat_curve_is_flagged_and_falling_curve_is_not() -> None:
    flat = _curve([0.5, 0.5, 0.6, 0.5])
    assert flat.slope is not None
    assert abs(flat.slope) < 0.02
    assert D.difficulty_flags(flat) == ["flat_difficulty"]
    falling = _curve([1.0, 0.7, 0.3, 0.0])
    assert falling.slope is not None
    assert falling.slope < -0.1
    assert falling.spearman == pytest.approx(-1.0)
    assert D.difficulty_flags(falling) == []
    assert D.difficulty_flags(_curve([0.0, 0.0, 0.0, 0.0])) == ["no_signal"]
    assert D.difficulty_flags(_curve([0.1, 0.4, 0.7, 0.9])) == ["easier_when_harder"]


def test_level_result_counts_only_info_success_and_buckets() -> None:
    eps: list[dict[str, Any]] = [
        {"success": True, "turns": 2},
        {"success": False, "turns": 4, "error": "boom"},
        {"success": 1, "turns": 3},
    ]
    res = D.level_result(3, eps, (1, 2, 5))
    assert (res.n, res.successes, res.errors, res.first_error) == (3, 1, 1, "boom")  # 1 is not `True`
    assert set(res.pass_at_k) == {"1", "2"}  # k=5 > n is dropped, not clipped
    assert [D.bucket(r) for r in (0.9, 0.5, 0.1)] == ["easy", "medium", "hard"]
    diffs = {"random": _curve([0, 0, 0, 0]), "noisy:0.3": _curve([1, 0.5, 0.2, 0]), "oracle": _curve([1, 1, 1, 1])}
    assert D.reference_policy(diffs) == "noisy:0.3"


def test_vendi_and_pairwise_distance_known_answers() -> None:
    same = cosine_matrix(np.ones((4, 3)))
    assert vendi_score(same) == pytest.approx(1.0)
    assert mean_pairwise_distance(same) == pytest.approx(0.0)
    ortho = cosine_matrix(np.eye(4))
    assert vendi_score(ortho) == pytest.approx(4.0)
    assert mean_pairwise_distance(ortho) == pytest.approx(1.0)
    two_pairs = cosine_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1.0]]))
    assert vendi_score(two_pairs) == pytest.approx(2.0)


def test_structural_measures() -> None:
    assert jaccard_distance({"move", "look"}, {"move", "take"}) == pytest.approx(2 / 3)
    assert jaccard_distance(set(), set()) == 0.0
    src_a = "def f(x):\n    return x + 1\n"
    src_b = "class A:\n    def g(self):\n        for i in range(3):\n            print(i)\n"
    prof = profile_similarity([ast_ngrams(src_a), ast_ngrams(src_a), ast_ngrams(src_b)])
    assert prof[0, 1] == pytest.approx(1.0)
    assert prof[0, 2] < 0.5
    assert not ast_ngrams("def broken(:")
    coords = pca_2d(np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0.1, 0]]))
    assert coords.shape == (4, 2)
    assert np.ptp(coords[:, 0]) == pytest.approx(3.0, abs=0.05)


def test_verdict_reasons() -> None:
    oracle_ok = {str(lv): {"n": 2, "successes": 2} for lv in range(1, 11)}
    evidence = {
        "checker": {"passed": True, "results": [{"name": "reset", "passed": True}]},
        "oracle": oracle_ok,
        "degeneracy": {"constant": {"5": 0.0}, "random": {"5": 0.0, "10": 0.0}},
    }
    assert verdict(evidence).verdict == "correct"
    bad = json.loads(json.dumps(evidence))
    bad["oracle"]["7"] = {"n": 2, "successes": 1, "errors": ["ValueError: x"]}
    bad["degeneracy"]["random"]["10"] = 0.5
    v = verdict(bad)
    assert v.verdict == "incorrect"
    assert any("oracle does not solve level(s) 7" in r for r in v.reasons)
    # the env's own sampler may read hidden state: its wins are never a defect (at most sampler_leaks_answer)
    assert not any("random" in r for r in v.reasons) and len(v.reasons) == 1
    assert verdict({"build_error": "ImportError: nope"}).verdict == "error"
    judged = verdict(evidence, {"verdict": "fail", "issues": ["oracle ignores rule 2"]})
    assert judged.verdict == "incorrect"
    assert "oracle ignores rule 2" in judged.reasons[0]


def test_verdict_reads_the_structured_fields_of_check_results_never_their_text() -> None:
    def evidence(*results: dict[str, object], has_oracle: bool = True) -> dict[str, object]:
        oracle = {str(lv): {"n": 1, "successes": 1} for lv in range(1, 11)} if has_oracle else {}
        checker = {"passed": False, "results": [{"name": "reset", "passed": True}, *results]}
        return {"checker": checker, "oracle": oracle, "degeneracy": {}, "facts": {"has_oracle": has_oracle}}

    # env text that reads like a consequence, a skip or a missing oracle is only text
    text = "first observation differs: 'x ] skipped: 1' != 'x ] not judged: NotImplementedError'"
    lying = {"name": "determinism", "passed": False, "status": "fail", "level": 1, "seed": 0, "reason": text}
    assert verdict(evidence(lying)).verdict == "incorrect"
    assert verdict(evidence(lying, has_oracle=False)).verdict == "incorrect"
    # a real consequence of a failure reported on its own, whatever its text
    skipped = {"name": "clone", "passed": False, "status": "skipped", "reason": "anything at all"}
    assert verdict(evidence(skipped)).verdict == "correct"
    # without an oracle, a check that failed because solve() is not implemented is said once, in the notes
    no_solve = {"name": "oracle", "passed": False, "status": "error", "error_type": "NotImplementedError",
                "reason": "raised NotImplementedError: 'no oracle'"}  # fmt: skip
    assert verdict(evidence(no_solve, has_oracle=False)).verdict == "unverified"
    posing = {**no_solve, "error_type": "ValueError", "reason": "raised ValueError: 'NotImplementedError'"}
    assert verdict(evidence(posing, has_oracle=False)).verdict == "incorrect"
    # a warning is reported apart, not as a defect
    warning = {"name": "metadata", "passed": False, "status": "fail", "severity": "warning", "reason": "odd"}
    judged = verdict(evidence(warning))
    assert judged.verdict == "correct" and "checker metadata: odd" in judged.warnings
    assert judged.findings[0]["severity"] == "warning" and judged.findings[0]["evidence"]["check"] == "metadata"


def test_parse_rubric_accepts_json_in_prose_and_reports_garbage() -> None:
    reply = 'Here you go:\n```json\n{"verdict": "FAIL", "score": 3, "issues": ["no oracle"]}\n```'
    assert parse_rubric(reply) == {"verdict": "fail", "score": 3.0, "issues": ["no oracle"]}
    assert parse_rubric("looks fine to me")["verdict"] == "unparseable"
    assert parse_rubric('{"a": 1} then {"verdict": "pass", "issues": "none"}')["issues"] == ["none"]


def test_schema_round_trip_is_exact() -> None:
    lv = LevelResult(level=1, n=4, successes=3, rate=0.75, pass_at_k={"1": 0.75, "2": 1.0}, mean_turns=2.5)
    curve = D.policy_difficulty("random", [lv])
    corr = Correctness("incorrect", ["oracle does not solve level(s) 3"], {"passed": False}, {"3": {"n": 1}})
    env = EnvEvaluation("x:Y", "builtin", "x:Y", "game", "d", corr, {"random": curve}, "random", None, None, "easy")
    div = DiversityResult(embedder="e", n=1, near_duplicates=[{"a": "p", "b": "q", "kind": "ast", "similarity": 1.0}])
    report = EvaluationReport(run={"suite": "s", "levels": [1]}, envs=[env], diversity=div, summary={"n_envs": 1})
    data = json.loads(json.dumps(report.to_dict()))
    back = EvaluationReport.from_dict(data)
    assert back == report
    assert back.to_dict() == report.to_dict()
    assert list(data) == ["schema_version", "run", "summary", "envs", "diversity"]
    with pytest.raises(ValueError, match="not compatible"):
        EvaluationReport.from_dict({**data, "schema_version": "2.0"})
    with pytest.raises(KeyError, match="x:Y"):
        back.env("nope")


def test_enumeration_helper_checks_its_input() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k_enumerate([True], 2)
    assert list(itertools.combinations(range(3), 2))  # sanity of the reference itself
