"""Findings from evidence: severities, statistical rate flags, structured fields, exact differences (aliases:
test_evaluate_aliases)."""

from __future__ import annotations

from typing import Any

from gymverse.checker._support import differ_at, first_difference, same
from gymverse.evaluate.correctness import verdict
from gymverse.evaluate.findings import findings, lower_bound


def _evidence(**probes: Any) -> dict[str, Any]:
    facts = {"contract": "gem", "success_rule": "reward>=1", "success_rule_note": "inferred from the rewards",
             "success_rule_source": "inferred", "reward_range": [-1.0, 1.0], "has_oracle": False}  # fmt: skip
    base: dict[str, object] = {"reset_failures": [], "constant_counts": {}, "reward_violations": [], "step_crashes": []}
    return {"checker": {"passed": True, "results": []}, "oracle": {}, "degeneracy": {}, "facts": facts,
            "probes": {**base, **probes}}  # fmt: skip


def test_the_lower_bound_needs_evidence_not_a_lucky_point_estimate() -> None:
    assert lower_bound(3, 8) < 0.25 < 3 / 8  # the 3/8 against a 25% limit: not a flag
    assert lower_bound(8, 8) > 0.7 and lower_bound(0, 8) == 0.0 and lower_bound(0, 0) == 0.0
    assert lower_bound(16, 32) > 0.25 > lower_bound(4, 8)  # more episodes make the same rate conclusive


def test_a_borderline_constant_is_not_a_defect_and_a_winner_at_level_1_is() -> None:
    border = findings(_evidence(constant_counts={"\\boxed{0}": {"5": [3, 8]}, "\\boxed{1}": {"5": [0, 8]}}))
    assert border.items == []
    low = findings(_evidence(constant_counts={"\\boxed{0}": {"1": [7, 8], "10": [0, 8]}, "\\boxed{9}": {"1": [0, 8]}}))
    assert low.flags == ["degenerate_constant"]
    assert low.items[0]["evidence"] == {"level": 1, "action": "\\boxed{0}", "wins": 7, "n": 8,
                                        "lower_bound": 0.589, "chance": 0.438}  # fmt: skip


def test_no_success_rule_is_decided_by_the_field_not_the_note() -> None:
    ev = _evidence()
    ev["facts"]["success_rule_note"] = "none of your business"  # env-controlled text cannot raise the finding
    assert "no_success_rule" not in findings(ev).flags
    ev["facts"].update(success_rule_source="none", success_rule_note="looks fine")  # nor hide it
    assert "no_success_rule" in findings(ev).flags


def test_warnings_never_make_an_env_incorrect() -> None:
    penalty = {"action": "\\boxed{x}", "level": 1, "seed": 0, "error": "reward -0.1 outside the declared range (0, 1)",
               "reward": -0.1, "format_error": True}  # fmt: skip
    ev = _evidence(reward_violations=[penalty], constant_counts={"\\boxed{yes}": {"1": [16, 32]}})
    c = verdict(ev)
    assert c.verdict == "unverified" and c.reasons == []
    assert {f["code"]: f["severity"] for f in c.findings} == {"format_penalty_range": "warning",
                                                               "guessable_answer": "warning"}  # fmt: skip
    ev["probes"]["reward_violations"] = [{**penalty, "format_error": False, "reward": -1.0}]
    assert verdict(ev).verdict == "incorrect"


def test_a_difference_names_the_exact_key_and_both_values_and_ignores_set_order() -> None:
    a = [["act", "obs", 1.0, {"score": 3, "log": {"elapsed_ms": 12, "items": "x" * 300}}]]
    b = [["act", "obs", 1.0, {"score": 3, "log": {"elapsed_ms": 13, "items": "x" * 300}}]]
    assert differ_at(a, b) == ("[0][3]['log']['elapsed_ms']", 12, 13)
    assert first_difference(a, b) == "at [0][3]['log']['elapsed_ms']: 12 != 13"
    assert same(["You hold {'rope', 'lamp', 'key'}."], ["You hold {'key', 'lamp', 'rope'}."])
    assert not same(["You hold {'rope', 'lamp'}."], ["You hold {'rope', 'map'}."])


SLOW_RESET = """
from gem.core import Env
import random
import time


class TilePuzzleEnv(Env):
    def __init__(self, complexity: int = 1, **_):
        super().__init__()
        self.complexity = complexity
        self.tiles = []

    def reset(self, seed=None):
        super().reset(seed)
        # search for a layout with a unique solution: slow for some seeds at high levels, but it ends
        self.tiles = [random.randint(0, 9) for _ in range(3 + self.complexity)]
        if self.complexity >= 10 and seed == 2:
            time.sleep(0.6)
        if self.complexity >= 10 and seed == 3 and {HANG}:
            while True:
                time.sleep(0.05)
        return f"Tiles: {self.tiles}. Answer \\\\boxed{{sum}}.", {}

    def step(self, action):
        ok = action.strip() == "\\\\boxed{%d}" % sum(self.tiles)
        return "Done.", 1.0 if ok else -1.0, True, False, {}

    def sample_random_action(self):
        return "\\\\boxed{%d}" % random.randint(0, 90)
"""


def test_a_slow_but_finite_reset_is_a_warning_and_a_hang_is_not(tmp_path: Any) -> None:
    from gymverse.evaluate.correctness import HOST_FACTORY
    from gymverse.evaluate.probes import Probe
    from gymverse.sandbox.hosted import EnvHost

    for hang in (False, True):  # hosted as `gymverse evaluate` hosts it: every deadline is kept from here
        files = {"tiles.py": SLOW_RESET.replace("{HANG}", str(hang))}
        with EnvHost(HOST_FACTORY, ["gem:tiles.py"], files=files, call_timeout=5.0) as host:
            host.make(1).close()  # started here: a loaded machine's start-up is not the env's time
            probe = Probe(host.make, reset_timeout=0.3, episode_timeout=3.0)
            probe.hang_bound = 1.5
            probe.resets([10], seeds=4)
        found = findings({"probes": {**probe.out, "constant_counts": {}}})
        codes = {f["code"]: f for f in found.items}
        assert set(codes) == ({"slow_reset", "hang"} if hang else {"slow_reset"}), found.items
        slow = codes["slow_reset"]
        assert slow["severity"] == "warning" and slow["evidence"]["seed"] == 2 and slow["evidence"]["level"] == 10
        assert 0.3 < slow["evidence"]["seconds"] < 1.5
        if hang:
            assert codes["hang"]["severity"] == "defect" and codes["hang"]["evidence"]["seed"] == 3
