"""Turn the evidence of the correctness job into findings: a code, a severity, a message and its evidence as data.

Two severities: a **defect** breaks training (crash, hang, reward outside the declared range, complexity no-op,
accepts wrong answers, a constant answer wins, oracle fails, unsafe behaviour) and makes the env ``incorrect``; a
**warning** (a guessable answer, a leaky sampler, a slow reset, a format penalty outside the declared range) is
reported and changes nothing. Degeneracy is judged only from answers a model could write (constants in the env's
visible answer format, `probes.candidates`); the env's own ``sample_random_action`` may draw from hidden state, so
its wins are at most a ``sampler_leaks_answer`` warning. A rate is flagged only when its one-sided 95% Wilson
lower bound clears the threshold, never on a point estimate from a few episodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFECT, WARNING = "defect", "warning"
#: A constant answer is degenerate when its lower bound reaches this and it beats random play by the margin.
CONSTANT_MIN_RATE = 0.5
CONSTANT_MARGIN = 0.25
#: Instances where two different constant answers both win before the env is said to accept wrong answers.
WRONG_ANSWER_MIN_INSTANCES = 2
#: One-sided 95%.
Z95 = 1.6448536269514722
#: Attempts listed in an ``unsafe`` finding.
UNSAFE_SHOWN = 5
_UNSAFE_WORDS = {
    "read_file": "reads the file",
    "write_file": "writes",
    "read_environ": "reads the environment variable",
    "socket": "opens a socket:",
    "spawn": "starts a process:",
    "native_code": "loads native code:",
}


def lower_bound(successes: int, n: int, z: float = Z95) -> float:
    """One-sided Wilson score lower bound of a success rate (0 for no episodes)."""
    if n <= 0:
        return 0.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


@dataclass
class Findings:
    """Every finding (``code``, ``severity``, ``message``, ``evidence``), informational notes, flags, a summary."""

    items: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    no_random_action: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    def add(self, code: str, message: str, severity: str = DEFECT, flag: bool = True, **evidence: Any) -> None:
        """One finding; `evidence` is data (level, seed, action, key, values ...), never parsed back from text."""
        self.items.append({"code": code, "severity": severity, "message": message, "evidence": evidence})
        if flag and code not in self.flags:
            self.flags.append(code)

    @property
    def reasons(self) -> list[str]:
        """The defects' messages: what makes the env incorrect."""
        return [f["message"] for f in self.items if f["severity"] == DEFECT]

    @property
    def warnings(self) -> list[str]:
        """The warnings' messages: reported, never part of the verdict."""
        return [f["message"] for f in self.items if f["severity"] == WARNING]


def _resets(f: Findings, probes: Mapping[str, Any]) -> None:
    seeds = probes.get("reset_seeds", 0)
    for fail in probes.get("reset_failures", []):
        level, seed = fail["level"], fail["seed"]
        if fail["kind"] == "hang":
            f.add("hang", f"reset hangs at level {level} seed {seed}: {fail['error']}", level=level, seed=seed)
        elif fail["kind"] == "build":
            f.add("crash", f"{fail['error']}", level=level)
        else:
            n = fail.get("n_seeds", seeds)
            msg = (
                f"reset crashes on {fail['n_failed']}/{n} seeds at level {level} (first: seed {seed}): {fail['error']}"
            )
            f.add("crash", msg, level=level, seed=seed, n_failed=fail["n_failed"], n_seeds=n)
    for slow in probes.get("slow_resets", []):
        f.add(
            "slow_reset",
            f"reset is slow but finishes: {slow['seconds']:.2f}s at level {slow['level']} seed {slow['seed']} "
            f"(over the {slow['limit']:g}s probe limit, under the {slow['bound']:g}s hang bound)",
            WARNING,
            **slow,
        )


def _complexity(f: Findings, c: Mapping[str, Any] | None) -> None:
    if not c or c.get("fresh") is None:
        if c and c.get("error"):
            f.notes.append(f"complexity not probed: {c['error']}")
        return
    lo, hi, knob = c["low"], c["high"], c.get("knob")
    ev = {"low": lo, "high": hi, "knob": knob, "fresh": c["fresh"], "runtime": c.get("runtime")}
    if knob is None:
        f.add(
            "complexity_noop",
            "complexity never reaches the env: no complexity= keyword, complexity attribute or "
            "evolve/set_complexity method",
            **ev,
        )
    elif not c["fresh"] and not c.get("runtime"):
        f.add(
            "complexity_noop", f"complexity no-op: levels {lo} and {hi} give identical instances (knob: {knob})", **ev
        )
    elif c["fresh"] and c.get("runtime") is False:
        f.add(
            "complexity_noop_runtime",
            f"complexity no-op on the training path: built at level {lo} then changed to {hi} ({knob}), the env "
            f"keeps its level-{lo} instances (only fresh builds at level {hi} differ)",
            **ev,
        )
    elif not c["fresh"] and c.get("runtime"):
        f.add(
            "complexity_noop",
            f"complexity ignored when building fresh at level {hi} (only run-time changes work)",
            **ev,
        )
    if c.get("error") and c.get("fresh") is not None:
        f.add("crash", str(c["error"]), **ev)


def _chance(counts: Mapping[str, Mapping[str, list[int]]], level: str) -> float:
    """Random play built from what a model sees: one of the distinct candidate answers, uniformly."""
    rates = [by[level][0] / by[level][1] for by in counts.values() if level in by and by[level][1]]
    return sum(rates) / len(rates) if rates else 0.0


def _constants(f: Findings, probes: Mapping[str, Any], max_rate: float) -> dict[str, float]:
    """Degenerate constants (defect) and guessable answers (warning); returns the best visible answer per level."""
    counts: Mapping[str, Mapping[str, list[int]]] = probes.get("constant_counts") or {}
    worst: tuple[float, str, str, int, int, float] | None = None
    guess: tuple[float, str, str, int, int] | None = None
    best: dict[str, float] = {}
    for action, by_level in counts.items():
        for level, (wins, n) in by_level.items():
            rate, low = wins / max(1, n), lower_bound(wins, n)
            best[level] = max(best.get(level, 0.0), rate)
            chance = _chance(counts, level)
            if low >= CONSTANT_MIN_RATE and rate >= chance + CONSTANT_MARGIN:
                if worst is None or low > worst[0]:
                    worst = (low, action, level, wins, n, chance)
            elif low > max_rate and (guess is None or low > guess[0]):
                guess = (low, action, level, wins, n)
    if worst is not None:
        low, action, level, wins, n, chance = worst
        f.add(
            "degenerate_constant",
            f"degenerate: the constant answer {action} wins {wins}/{n} episodes at level {level} (95% lower bound "
            f"{low:.0%}; random play over the visible answers: {chance:.0%})",
            level=int(level), action=action, wins=wins, n=n, lower_bound=round(low, 3), chance=round(chance, 3),
        )  # fmt: skip
    elif guess is not None:
        low, action, level, wins, n = guess
        f.add(
            "guessable_answer",
            f"guessable: the constant answer {action} wins {wins}/{n} episodes at level {level} (95% lower bound "
            f"{low:.0%} > {max_rate:.0%}): a model can score without solving",
            WARNING, level=int(level), action=action, wins=wins, n=n, lower_bound=round(low, 3),
        )  # fmt: skip
    return best


def _wrong_answers(f: Findings, probes: Mapping[str, Any]) -> None:
    wrong = probes.get("wrong_answer_wins") or {}
    if wrong.get("instances", 0) >= WRONG_ANSWER_MIN_INSTANCES:
        ex = wrong["examples"][0]
        a, b = ex["actions"][:2]
        d = ex.get("differ")
        if d:  # the evidence that they are two answers: where the env treated them differently
            why = f"the env tells them apart at level {d['level']} seed {d['seed']}, step {d['step'] + 1}, "
            why += f"{d['field']}: {d['values'][0]!r:.120} != {d['values'][1]!r:.120}"
        else:
            why = "the env rejected neither on any instance"
        f.add(
            "accepts_wrong_answers",
            f"accepts wrong answers: {a} and {b} both succeed at level {ex['level']} seed {ex['seed']}, but are not "
            f"one answer ({why}); {wrong['instances']} of {wrong['of']} probed instances have two different "
            "winning answers",
            level=ex["level"], seed=ex["seed"], actions=[a, b], instances=wrong["instances"], of=wrong["of"],
            differ=d,
        )  # fmt: skip


def _steps(f: Findings, probes: Mapping[str, Any]) -> None:
    for crash in probes.get("step_crashes", []):
        kind = "hang" if crash.get("kind") == "hang" else "crash"  # set by the probe, not read from the text
        verb = "hangs" if kind == "hang" else "crashes"
        lv, seed, action = crash["level"], crash["seed"], crash["action"]
        f.add(kind, f"step {verb} on {action} at level {lv} seed {seed}: {crash['error']}", level=lv, seed=seed,
              action=action)  # fmt: skip
    bad = probes.get("reward_violations", [])
    penalty = [b for b in bad if b.get("format_error")]
    other = [b for b in bad if not b.get("format_error")]
    for b in other[:1]:
        f.add("reward_range", f"{b['error']} (action {b['action']}, level {b['level']} seed {b['seed']})",
              level=b["level"], seed=b["seed"], action=b["action"], reward=b.get("reward"))  # fmt: skip
    for b in penalty[:1]:
        f.add(
            "format_penalty_range",
            f"format penalty {b['error']} (action {b['action']}, level {b['level']} seed {b['seed']})",
            WARNING, level=b["level"], seed=b["seed"], action=b["action"], reward=b.get("reward"),
        )  # fmt: skip


def _sampler(f: Findings, evidence: Mapping[str, Any], best: Mapping[str, float], max_rate: float) -> None:
    """The env's own sampler winning where no visible answer does: it reads hidden state (a warning)."""
    counts = evidence.get("degeneracy_counts") or {}
    for policy in ("random", "constant"):
        for level, (wins, n) in (counts.get(policy) or {}).items():
            low, rate, visible = lower_bound(wins, n), wins / max(1, n), best.get(level)
            if low > max_rate and visible is not None and rate >= visible + CONSTANT_MARGIN:
                f.add(
                    "sampler_leaks_answer",
                    f"sample_random_action leaks the answer: the env's own {policy} play wins {wins}/{n} at level "
                    f"{level} while no answer built from the observation wins more than {visible:.0%} (its wins "
                    "are not counted as degeneracy)",
                    WARNING, level=int(level), policy=policy, wins=wins, n=n, visible_best=round(visible, 3),
                )  # fmt: skip
                return


def _unsafe(f: Findings, attempts: list[Any]) -> None:
    if not attempts:
        return
    first: dict[str, str] = {}
    for kind, detail in attempts:
        first.setdefault(kind, detail)  # the first attempt of each kind, in the order they came
    shown = [f"{_UNSAFE_WORDS.get(k, k)} {d}" for k, d in list(first.items())[:UNSAFE_SHOWN]]
    more = f" (+{len(attempts) - len(shown)} more attempts)" if len(attempts) > len(shown) else ""
    f.add(
        "unsafe",
        f"unsafe: the env's code tried to act outside its box: {'; '.join(shown)}{more}",
        attempts=[{"kind": k, "detail": d} for k, d in attempts],
    )


def findings(evidence: Mapping[str, Any], degeneracy_max_rate: float = 0.25) -> Findings:
    """Findings, notes and flags from ``evidence["probes"]``, ``["facts"]`` and ``["audit"]`` (absent: none)."""
    f = Findings()
    probes, facts = evidence.get("probes"), evidence.get("facts") or {}
    _unsafe(f, [list(a) for a in evidence.get("audit") or []])
    if facts:
        rule, note = facts.get("success_rule"), facts.get("success_rule_note", "")
        rr = facts.get("reward_range")
        if facts.get("success_rule_source") == "none":  # a field our loader sets, not the note's words
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
    best = _constants(f, probes, degeneracy_max_rate)
    _wrong_answers(f, probes)
    _steps(f, probes)
    if not f.no_random_action:
        _sampler(f, evidence, best, degeneracy_max_rate)
    f.summary.update(
        flags=list(f.flags),
        complexity=probes.get("complexity"),
        reset_seeds=probes.get("reset_seeds"),
        constant_seeds=probes.get("constant_seeds"),
    )
    return f


__all__ = ["DEFECT", "WARNING", "Findings", "findings", "lower_bound"]
