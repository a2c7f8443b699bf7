"""Turn the probe evidence of the correctness job into reasons (defects), notes (facts) and flags, in words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: A constant answer is degenerate when it wins at least this often and this much more often than random play.
CONSTANT_MIN_RATE = 0.5
CONSTANT_MARGIN = 0.25
#: Instances where two different constant answers both win before the env is said to accept wrong answers.
WRONG_ANSWER_MIN_INSTANCES = 2


@dataclass
class Findings:
    """Defect reasons, informational notes, flags and a JSON summary."""

    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    no_random_action: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    def add(self, flag: str, reason: str) -> None:
        """One defect."""
        self.reasons.append(reason)
        if flag not in self.flags:
            self.flags.append(flag)


def _resets(f: Findings, probes: Mapping[str, Any]) -> None:
    seeds = probes.get("reset_seeds", 0)
    for fail in probes.get("reset_failures", []):
        level, seed = fail["level"], fail["seed"]
        if fail["kind"] == "hang":
            f.add("hang", f"reset hangs at level {level} seed {seed}: {fail['error']}")
        elif fail["kind"] == "build":
            f.add("crash", f"{fail['error']}")
        else:
            f.add(
                "crash",
                f"reset crashes on {fail['n_failed']}/{fail.get('n_seeds', seeds)} seeds at level {level} "
                f"(first: seed {seed}): {fail['error']}",
            )


def _complexity(f: Findings, c: Mapping[str, Any] | None) -> None:
    if not c or c.get("fresh") is None:
        if c and c.get("error"):
            f.notes.append(f"complexity not probed: {c['error']}")
        return
    lo, hi, knob = c["low"], c["high"], c.get("knob")
    if knob is None:
        f.add(
            "complexity_noop",
            "complexity never reaches the env: no complexity= keyword, complexity attribute or "
            "evolve/set_complexity method",
        )
    elif not c["fresh"] and not c.get("runtime"):
        f.add("complexity_noop", f"complexity no-op: levels {lo} and {hi} give identical instances (knob: {knob})")
    elif c["fresh"] and c.get("runtime") is False:
        f.add(
            "complexity_noop_runtime",
            f"complexity no-op on the training path: built at level {lo} then changed to {hi} ({knob}), the env "
            f"keeps its level-{lo} instances (only fresh builds at level {hi} differ)",
        )
    elif not c["fresh"] and c.get("runtime"):
        f.add("complexity_noop", f"complexity ignored when building fresh at level {hi} (only run-time changes work)")
    if c.get("error") and c.get("fresh") is not None:
        f.add("crash", str(c["error"]))


def _constants(f: Findings, probes: Mapping[str, Any], random_rates: Mapping[str, float]) -> None:
    worst: tuple[float, str, str, float] | None = None
    for action, by_level in probes.get("constants", {}).items():
        for level, rate in by_level.items():
            chance = float(random_rates.get(level, 0.0))
            if rate >= CONSTANT_MIN_RATE and rate >= chance + CONSTANT_MARGIN and (worst is None or rate > worst[0]):
                worst = (rate, action, level, chance)
    if worst is not None:
        rate, action, level, chance = worst
        f.add(
            "degenerate_constant",
            f"degenerate: the constant answer {action} wins {rate:.0%} at level {level} (random play: {chance:.0%})",
        )
    wrong = probes.get("wrong_answer_wins") or {}
    if wrong.get("instances", 0) >= WRONG_ANSWER_MIN_INSTANCES:
        ex = wrong["examples"][0]
        a, b = ex["actions"][:2]
        f.add(
            "accepts_wrong_answers",
            f"accepts wrong answers: {a} and {b} both succeed at level {ex['level']} seed {ex['seed']} "
            f"({wrong['instances']} of {wrong['of']} probed instances have two different winning answers)",
        )
    for crash in probes.get("step_crashes", []):
        kind = "hang" if crash.get("kind") == "hang" else "crash"  # set by the probe, not read from the text
        verb = "hangs" if kind == "hang" else "crashes"
        f.add(
            kind, f"step {verb} on {crash['action']} at level {crash['level']} seed {crash['seed']}: {crash['error']}"
        )
    for bad in probes.get("reward_violations", [])[:1]:
        f.add("reward_range", f"{bad['error']} (action {bad['action']}, level {bad['level']} seed {bad['seed']})")


def findings(evidence: Mapping[str, Any], degeneracy_max_rate: float = 0.25) -> Findings:
    """Reasons, notes and flags from ``evidence["probes"]`` and ``evidence["facts"]`` (absent: nothing to say)."""
    f = Findings()
    probes, facts = evidence.get("probes"), evidence.get("facts") or {}
    if facts:
        rule, note = facts.get("success_rule"), facts.get("success_rule_note", "")
        rr = facts.get("reward_range")
        if str(note).startswith("none"):
            f.add("no_success_rule", f"no success signal: {note}; pass --success-rule (e.g. 'reward>=1')")
        else:
            f.notes.append(f"success rule: {rule} ({note})")
        if rr:
            f.notes.append(f"reward range: [{rr[0]:g}, {rr[1]:g}]")
        f.summary.update(success_rule=rule, success_rule_note=note, reward_range=rr)
    if not probes:
        return f
    if probes.get("random_action"):
        f.no_random_action = True
        f.notes.append(f"random actions: {probes['random_action']}; random-play checks were skipped")
    _resets(f, probes)
    _complexity(f, probes.get("complexity"))
    random_rates = {} if f.no_random_action else evidence.get("degeneracy", {}).get("random", {})
    _constants(f, probes, random_rates)
    f.summary.update(
        flags=list(f.flags),
        complexity=probes.get("complexity"),
        reset_seeds=probes.get("reset_seeds"),
        constant_seeds=probes.get("constant_seeds"),
    )
    return f


__all__ = ["Findings", "findings"]
