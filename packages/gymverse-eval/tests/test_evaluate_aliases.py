r"""Answer aliases judged by the env's own behaviour (tests/gem_corpus/aliases, GEM files as LLMs write them).

Two constant answers are one answer when the env treats them alike wherever both were played and rejects them
somewhere; no rule on their text decides. Each env runs in process and hosted in the sandbox's env host, where
the constants of a level are played in one batched request, as `gymverse evaluate` plays them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from gymverse.evaluate.correctness import HOST_FACTORY, CorrectnessConfig
from gymverse.evaluate.findings import WRONG_ANSWER_MIN_INSTANCES, findings
from gymverse.evaluate.probes import Probe
from gymverse.evaluate.suites import build_env
from gymverse.sandbox.hosted import EnvHost

TESTS = Path(__file__).parent
#: Kept out of the corpus suite (a folder without env.py is not loaded) and, like it, out of the linters.
ALIASES = TESTS / "gem_corpus" / "aliases"
EXECUTORS = ("inline", "hosted")


@contextmanager
def _probe(path: Path, executor: str) -> Iterator[Probe]:
    """A `Probe` of the GEM file at `path`, its constants played at the default levels and seeds."""
    cfg = CorrectnessConfig()
    if executor == "inline":
        probe = Probe(lambda level: build_env(f"gem:{path}", level), cfg.reset_timeout, cfg.episode_timeout)
        probe.constants(cfg.constant_levels, cfg.constant_seeds, {}, cfg.constant_more_seeds)
        yield probe
        return
    files = {path.name: path.read_text()}
    with EnvHost(HOST_FACTORY, [f"gem:{path.name}"], files=files, call_timeout=10.0) as host:
        host.make(1).close()  # started here: a loaded machine's start-up is not the env's time
        probe = Probe(host.make, cfg.reset_timeout, cfg.episode_timeout)
        probe.constants(cfg.constant_levels, cfg.constant_seeds, {}, cfg.constant_more_seeds)
        yield probe


def _wrong(probe: Probe) -> dict[str, Any] | None:
    found = findings({"probes": probe.out})
    return next((f for f in found.items if f["code"] == "accepts_wrong_answers"), None)


def _both_win(probe: Probe, a: str, b: str) -> int:
    """Instances where `a` and `b` both won: what a text rule keeping them apart would call wrong-answer wins."""
    pa, pb = probe.outcomes.played[a], probe.outcomes.played[b]
    return sum(pa[i][1] and pb[i][1] for i in pa.keys() & pb.keys())


@pytest.mark.parametrize("executor", EXECUTORS)
def test_spellings_the_parser_reads_alike_are_one_answer_even_when_echoed(executor: str) -> None:
    with _probe(ALIASES / "last_digit.py", executor) as probe:
        pass
    # the env reads "answer 0", "0" and "zero" as one move and echoes what was said: a rule on the text that keeps
    # "zero" apart from "0" (numbers, else words) saw wrong answers accepted here
    assert _both_win(probe, "\\boxed{zero}", "\\boxed{0}") >= WRONG_ANSWER_MIN_INSTANCES
    assert _both_win(probe, "\\boxed{answer 0}", "\\boxed{0}") >= WRONG_ANSWER_MIN_INSTANCES
    assert probe.out["wrong_answer_wins"]["instances"] == 0
    assert _wrong(probe) is None
    outcomes = probe.outcomes
    assert outcomes.one_answer("\\boxed{zero}", "\\boxed{answer 0}")
    assert not outcomes.one_answer("\\boxed{0}", "\\boxed{1}")  # distinct answers stay distinct
    # what the env echoed is blanked as the answers' own text, so the spellings differ nowhere
    assert outcomes.difference("\\boxed{answer 1}", "\\boxed{1}") is None


@pytest.mark.parametrize("executor", EXECUTORS)
def test_letters_a_case_sensitive_env_tells_apart_are_two_answers(executor: str) -> None:
    with _probe(ALIASES / "secret_letter.py", executor) as probe:
        pass
    # its hints treat "a" and "A" as different letters, its win check does not: it accepts a wrong answer, which a
    # rule folding case ("a" and "A" alike) hid
    wrong = _wrong(probe)
    assert wrong is not None and wrong["severity"] == "defect", probe.out["wrong_answer_wins"]
    ev = wrong["evidence"]
    assert set(ev["actions"]) == {"\\boxed{A}", "\\boxed{a}"}
    assert ev["instances"] >= WRONG_ANSWER_MIN_INSTANCES
    differ = ev["differ"]  # where the env told them apart: the step, the field and both values
    assert (differ["step"], differ["field"]) == (0, "observation") and differ["values"][0] != differ["values"][1]
    assert {"after" in v for v in differ["values"]} == {True, False}  # one hint says after, the other before
    assert f"level {differ['level']} seed {differ['seed']}" in wrong["message"]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_env_that_accepts_any_number_is_still_flagged(executor: str) -> None:
    with _probe(ALIASES / "ticket_check.py", executor) as probe:
        pass
    # "0", "1" and "-1" win every instance alike: nothing tells them apart, but nothing shows they are one answer
    # either (the env never rejects them), so they are not excused as spellings
    assert probe.out["constant_counts"]["\\boxed{1}"]["10"] == [8, 8]
    wrong = _wrong(probe)
    assert wrong is not None, probe.out["wrong_answer_wins"]
    assert wrong["evidence"]["differ"] is None and "rejected neither" in wrong["message"]
    assert wrong["evidence"]["instances"] == wrong["evidence"]["of"] == 40


def test_an_env_that_accepts_a_wrong_digit_is_flagged_where_the_answers_differ() -> None:
    with _probe(TESTS / "gem_corpus" / "digit_sum_quiz.py", "hosted") as probe:
        pass
    # "0" and "1" both win where the total holds both digits; elsewhere one wins and the other loses
    wrong = _wrong(probe)
    assert wrong is not None, probe.out["wrong_answer_wins"]
    differ = wrong["evidence"]["differ"]
    assert (differ["step"], differ["field"]) == (0, "success") and differ["values"] in ([True, False], [False, True])
    assert "accepts wrong answers" in wrong["message"] and "tells them apart" in wrong["message"]
