"""Correctness: the env checker, oracle solvability at every level, degeneracy, an LLM rubric judge.

`collect_evidence` builds the env, runs `gymverse.checker.check_env`, plays the oracle at every level 1..10 and the
degenerate policies (constant, random) at levels >= 5, runs the `probes` (many-seed resets, complexity on both
paths, constant answers), every call bounded by a deadline, and returns plain JSON. With the sandbox executor it
runs in the trusted process against the env hosted in a sandbox (`check_hosted`, `gymverse.sandbox.hosted`), so an
env cannot rewrite the checks or forge their result; the process and inline executors run it next to the env
(`_check_in_child`). `verdict` turns the evidence (plus an optional rubric verdict) into a `Correctness`
(`findings` phrases the probe evidence).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gymverse.checker.report import CheckResult, describe_error
from gymverse.deadline import CallTimeout, deadline
from gymverse.evaluate.findings import DEFECT, WARNING, findings
from gymverse.evaluate.policies import make_policy, run_episodes
from gymverse.evaluate.probes import Probe, env_facts, hang_bound, random_action_status
from gymverse.evaluate.schema import Correctness
from gymverse.evaluate.suites import EnvEntry, build_env
from gymverse.loader import prepare_ref
from gymverse.protocol import EnvLike
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox.hosted import EnvCallError, EnvHost, EnvHostError

ALL_LEVELS = tuple(range(1, 11))
DEGENERACY_LEVELS = (5, 7, 10)
DEGENERATE_POLICIES = ("constant", "random")
CHECK_TARGET = "gymverse.evaluate.correctness:_check_in_child"
#: What the env host builds envs with: ``build_from_ref(ref, complexity=level)`` (a core module: fast to import).
HOST_FACTORY = "gymverse.loader:build_from_ref"
#: Imports a registered id's suite once per host, under its own deadline (not the first build's).
HOST_PREPARE = "gymverse.loader:prepare_ref"
#: Env hosts are forked from a warm zygote (`EnvHost` ``forked``): no interpreter start per env. False: a fresh
#: launcher per host, with a warm spare started ahead (the benchmark's ``sandbox-fresh`` compares the two).
FORKED_HOSTS = True
#: Checker points of GymVerse's own contract that GEM envs are not written against (GymVerse `complexity_params`,
#: ``info["format_error"]``, format_penalty inside metadata.reward_range): not defects of a GEM env.
GEM_EXEMPT_CHECKS = ("complexity_params", "malformed_actions", "metadata")


@dataclass(frozen=True)
class CorrectnessConfig:
    """What the correctness pass runs and how strict it is."""

    checker_levels: tuple[int, ...] = (1, 5, 10)
    checker_seeds: tuple[int, ...] = (0, 1)
    oracle_seeds: tuple[int, ...] = (0, 1)
    degeneracy_levels: tuple[int, ...] = DEGENERACY_LEVELS
    degeneracy_seeds: tuple[int, ...] = tuple(range(8))
    #: A degenerate policy succeeding more often than this at a level >= 5 makes the env incorrect.
    degeneracy_max_rate: float = 0.25
    max_steps: int | None = None
    #: Resets probed per level (cheap: many seeds find bugs that hit only some of them).
    reset_seeds: int = 64
    probe_levels: tuple[int, ...] = (1, 3, 5, 7, 10)
    #: Constant answers are played at every evaluated level: one may win only at level 1.
    constant_levels: tuple[int, ...] = (1, 3, 5, 7, 10)
    constant_seeds: int = 8
    #: Seeds in all for a constant whose rate is high but not yet conclusive (see `findings.lower_bound`).
    constant_more_seeds: int = 32
    #: Per-reset and per-episode deadlines (seconds); a hang costs this much, once per level.
    reset_timeout: float = 1.0
    episode_timeout: float = 3.0
    #: The whole `check_env` run of one env.
    checker_timeout: float = 30.0
    #: One call into a hosted env (sandbox executor); the deadlines above bound whole episodes and stages.
    call_timeout: float = 10.0
    #: The sandbox job's own limit (None: the sum of the bounded stages plus slack).
    timeout: float | None = None

    def job_timeout(self) -> float:
        """The sandbox job's own limit."""
        if self.timeout is not None:
            return self.timeout
        hangs = len(self.probe_levels) * self.reset_timeout * 3 + len(self.constant_levels) * self.episode_timeout * 4
        slow = len(self.probe_levels) * hang_bound(self.reset_timeout)  # one slow-reset recheck per level
        return self.checker_timeout + 2 * hangs + slow + 60.0

    def job_kwargs(self, ref: str) -> dict[str, Any]:
        """Keyword arguments of `_check_in_child` for the env `ref`."""
        return {
            "ref": ref,
            "checker_levels": list(self.checker_levels),
            "checker_seeds": list(self.checker_seeds),
            "oracle_seeds": list(self.oracle_seeds),
            "degeneracy_levels": list(self.degeneracy_levels),
            "degeneracy_seeds": list(self.degeneracy_seeds),
            "max_steps": self.max_steps,
            "probe": {
                "reset_seeds": self.reset_seeds,
                "probe_levels": list(self.probe_levels),
                "constant_levels": list(self.constant_levels),
                "constant_seeds": self.constant_seeds,
                "constant_more_seeds": self.constant_more_seeds,
                "reset_timeout": self.reset_timeout,
                "episode_timeout": self.episode_timeout,
                "checker_timeout": self.checker_timeout,
            },
        }


def ref_host(
    ref: str,
    files: Mapping[str, str] | None,
    limits: SandboxLimits | None,
    call_timeout: float,
    readable_paths: Sequence[str],
    max_restarts: int = 2,
) -> EnvHost:
    """The sandboxed host the evaluator builds `ref` in (see `FORKED_HOSTS`)."""
    return EnvHost(HOST_FACTORY, [ref], files=files, limits=limits, call_timeout=call_timeout,
                   readable_paths=readable_paths, forked=FORKED_HOSTS, prestart=not FORKED_HOSTS,
                   prepare=HOST_PREPARE, max_restarts=max_restarts)  # fmt: skip


def _check_in_child(ref: str, **plan: Any) -> dict[str, Any]:
    """Worker side for the process and inline executors: the env is built in this process.

    `plan`: the evidence keywords of `collect_evidence` (`CorrectnessConfig.job_kwargs`).
    """

    def factory(complexity: int = 1) -> EnvLike:
        return build_env(ref, complexity)

    with contextlib.redirect_stdout(sys.stderr):
        try:
            prepare_ref(ref)  # an installed suite's import (seconds) is not the first build's deadline
        except Exception as err:
            return {"build_error": describe_error(err, 900)}
        return collect_evidence(factory, ref, **plan)


def check_hosted(
    ref: str,
    *,
    files: Mapping[str, str] | None = None,
    limits: SandboxLimits | None = None,
    call_timeout: float = 10.0,
    readable_paths: Sequence[str] = (),
    job_timeout: float | None = None,
    **plan: Any,
) -> dict[str, Any]:
    """Trusted side for the sandbox executor: the env runs in a sandboxed `EnvHost`, every check runs here.

    `plan`: the evidence keywords of `collect_evidence` (`CorrectnessConfig.job_kwargs`); `job_timeout`: the whole
    run's deadline, kept here (the host is killed when it passes, whatever its own limits).
    """
    host = ref_host(ref, files, limits, call_timeout, readable_paths)
    try:
        out = evidence_on(host, ref, job_timeout, plan)
    finally:
        host.close()
    return host_record(out, host)


def evidence_on(host: EnvHost, ref: str, job_timeout: float | None, plan: Mapping[str, Any]) -> dict[str, Any]:
    """`collect_evidence` against envs of `host` within `job_timeout` (the host is left open: other stages may
    use it; a timeout kills it)."""
    try:
        with deadline(job_timeout, "the correctness job"):
            try:
                host.start()  # an installed suite's import (seconds) is not the first build's deadline
            except (EnvHostError, EnvCallError) as err:
                return {"build_error": describe_error(err, 900)}
            return collect_evidence(host.make, ref, **plan)
    except CallTimeout as err:
        return {"error": str(err)}


def host_record(evidence: dict[str, Any], host: EnvHost) -> dict[str, Any]:
    """`evidence` plus how the closed `host` ran and what its env code tried outside its box (kept even when the
    job timed out)."""
    evidence["host"] = {"starts": host.starts, "isolation": host.result.isolation if host.result else []}
    evidence["audit"] = [list(a) for a in host.audit]
    return evidence


def collect_evidence(
    factory: Callable[[int], EnvLike],
    ref: str,
    checker_levels: Sequence[int],
    checker_seeds: Sequence[int],
    oracle_seeds: Sequence[int],
    degeneracy_levels: Sequence[int],
    degeneracy_seeds: Sequence[int],
    max_steps: int | None = None,
    probe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Checker report, oracle and degeneracy episodes and probes of the env `factory(level)` builds, as JSON."""
    from gymverse.checker import CheckTargetError, check_env

    pcfg = {**CorrectnessConfig().job_kwargs(ref)["probe"], **(probe or {})}
    clock = _Stages()
    try:
        with clock("build"):
            with deadline(pcfg["reset_timeout"] * 5, "building the env at level 1"):
                first = factory(1)
            facts = env_facts(first, pcfg["reset_timeout"])
            first.close()
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        return {"build_error": describe_error(err, 900), "seconds": clock.seconds}

    probes = Probe(factory, pcfg["reset_timeout"], pcfg["episode_timeout"])
    with clock("resets"):
        prints = probes.resets(pcfg["probe_levels"], pcfg["reset_seeds"])
        probes.complexity(prints, min(pcfg["probe_levels"]), max(pcfg["probe_levels"]))
    with clock("constants"):
        probes.constants(pcfg["constant_levels"], pcfg["constant_seeds"], prints, pcfg["constant_more_seeds"])
        probes.out["random_action"] = random_action_status(factory, pcfg["reset_timeout"])
    env_id = None if ref.startswith(("file:", "gem:")) else ref  # a registered id: its family must match
    hung = {f["level"] for f in probes.out["reset_failures"] if f["kind"] == "hang"}
    levels = [lv for lv in checker_levels if lv not in hung] or [1]  # a hanging level is reported already
    try:
        with clock("checker"), deadline(pcfg["checker_timeout"], "the env checker"):
            report = check_env(factory, levels=levels, seeds=checker_seeds, max_steps=max_steps,
                               env_id=env_id).to_dict()  # fmt: skip
    except CheckTargetError as err:
        report = {"target": ref, "passed": False, "meta": {}, "results": [], "error": str(err)}
    except CallTimeout as err:
        report = {"target": ref, "passed": False, "meta": {}, "results": [], "error": f"stopped: {err}"}
    oracle: dict[str, dict[str, Any]] = {}
    clock.start("oracle")
    for level in ALL_LEVELS if facts["has_oracle"] else ():
        eps = _episodes(factory, "oracle", level, oracle_seeds, max_steps, pcfg["episode_timeout"])
        oracle[str(level)] = {
            "n": len(eps),
            "successes": sum(e["success"] for e in eps),
            "errors": [e["error"] for e in eps if e.get("error")][:2],
        }
    degeneracy: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, list[int]]] = {}  # the sampler's play: {policy: {level: [wins, episodes]}}
    clock.start("degeneracy")
    for policy in DEGENERATE_POLICIES:
        rates = {}
        for level in degeneracy_levels:
            # a seed whose reset the probes saw fail (and, after a hang, the seeds after it) is not replayed: it
            # would cost a timeout and count as the loss it is counted as here
            good = probes.usable(level, degeneracy_seeds, prints)
            eps = _episodes(factory, policy, level, good, max_steps, pcfg["episode_timeout"])
            wins = sum(bool(e["success"]) for e in eps)
            n = len(eps) + len(degeneracy_seeds) - len(good)
            rates[str(level)] = wins / max(1, n)
            counts.setdefault(policy, {})[str(level)] = [wins, n]
        degeneracy[policy] = rates
    clock.start(None)
    return {"checker": report, "oracle": oracle, "degeneracy": degeneracy, "degeneracy_counts": counts,
            "probes": probes.out, "facts": facts, "seconds": clock.seconds}  # fmt: skip


class _Stages:
    """Wall seconds per stage of one correctness job (``seconds`` in its evidence: the benchmark's profile)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    def start(self, name: str | None) -> None:
        """End the running stage (if any) and start `name` (None: none)."""
        now = time.perf_counter()
        if self._open is not None:
            key, began = self._open
            self.seconds[key] = round(self.seconds.get(key, 0.0) + now - began, 4)
        self._open = None if name is None else (name, now)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.start(name)
        try:
            yield
        finally:
            self.start(None)


def _episodes(
    factory: Callable[[int], EnvLike],
    policy: str,
    level: int,
    seeds: Sequence[int],
    max_steps: int | None,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    try:
        with deadline(timeout, f"building the env at level {level}"):
            env = factory(level)
    except (Exception, CallTimeout) as err:
        return [{"success": False, "error": f"build failed: {type(err).__name__}: {err}"} for _ in seeds]
    try:
        return [e.to_dict() for e in run_episodes(env, make_policy(policy), seeds, max_steps, timeout=timeout)]
    finally:
        with contextlib.suppress(Exception):
            env.close()


def _failures(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every failed result in run order, with its structured fields as the checker wrote them."""
    out = []
    for r in report.get("results", []):
        if isinstance(r, Mapping) and not r.get("passed"):
            out.append(CheckResult.from_dict({"name": "", "passed": False, **r}).to_dict())
    return out


def _shown(r: Mapping[str, Any]) -> str:
    where = " ".join(f"{k}={r[k]}" for k in ("level", "seed") if r.get(k) is not None)
    return f"[{where}] {r['reason']}" if where else str(r["reason"])


def _checker_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    failed: dict[str, str] = {}
    for r in _failures(report):
        failed.setdefault(r["name"], _shown(r))
    out: dict[str, Any] = {"passed": bool(report.get("passed")), "n_checks": len(report.get("results", []))}
    out["failed"] = failed
    if report.get("error"):
        out["error"] = report["error"]
    return out


def _no_oracle(evidence: Mapping[str, Any]) -> bool:
    # the trusted side's own probe (`probes.env_facts`: solve() raised NotImplementedError), not episode error text
    facts = evidence.get("facts") or {}
    return facts.get("has_oracle") is False


def verdict(
    evidence: Mapping[str, Any], rubric: Mapping[str, Any] | None = None, degeneracy_max_rate: float = 0.25
) -> Correctness:
    """Turn sandbox evidence (the dict `_check_in_child` returns, or ``{"error"}``) into a per-env verdict.

    ``incorrect`` exactly when some finding is a defect; warnings are reported apart and change nothing."""
    if "error" in evidence or "build_error" in evidence:
        why = evidence.get("build_error") or evidence.get("error")
        found = findings({"audit": evidence.get("audit")})  # an env that stalled its job may still have tried
        items = [{"code": "error", "severity": DEFECT, "message": f"cannot build the env: {why}", "evidence": {}}]
        items += found.items
        return Correctness("error", [f"cannot build the env: {why}", *found.reasons], rubric=dict(rubric) if rubric
                           else None, findings=items)  # fmt: skip
    no_oracle = _no_oracle(evidence)
    found = findings(evidence, degeneracy_max_rate)
    checker = _checker_summary(evidence.get("checker", {}))
    if checker.get("error"):
        found.add("checker", f"checker: {checker['error']}", flag=False)
    gem = evidence.get("facts", {}).get("contract") == "gem"
    # decided from each result's structured fields; its reason (which may quote the env) is only displayed
    counted: dict[tuple[str, str], dict[str, Any]] = {}
    for r in _failures(evidence.get("checker", {})):
        if r["error_type"] == "NotImplementedError" and (no_oracle or found.no_random_action):
            continue  # no oracle / no random action: said once in the notes, not as a defect of every check
        if r["status"] in ("skipped", "not_judged") or (gem and r["name"] in GEM_EXEMPT_CHECKS):
            continue  # consequences of a failure reported on its own, or GymVerse-only contract points
        counted.setdefault((r["severity"], r["name"]), r)
    for (severity, name), r in counted.items():
        where = {k: r[k] for k in ("level", "seed") if r.get(k) is not None}
        found.add(name, f"checker {name}: {_shown(r)}", DEFECT if severity == "defect" else WARNING, flag=False,
                  check=name, detail=str(r["reason"]), **where)  # fmt: skip
    oracle = {lvl: {"n": int(v["n"]), "successes": int(v["successes"])} for lvl, v in evidence["oracle"].items()}
    unsolved = [lvl for lvl, v in oracle.items() if v["successes"] < v["n"] or v["n"] == 0]
    if unsolved and not no_oracle:
        first = evidence["oracle"][unsolved[0]].get("errors") or []
        detail = f" ({first[0]})" if first else ""
        found.add("oracle_fails", f"oracle does not solve level(s) {', '.join(unsolved)}{detail}", flag=False,
                  levels=[int(lv) for lv in unsolved])  # fmt: skip
    degeneracy = {p: {lvl: float(r) for lvl, r in rates.items()} for p, rates in evidence["degeneracy"].items()}
    if rubric is not None and rubric.get("verdict") == "fail":
        issues = "; ".join(str(i) for i in rubric.get("issues", [])[:3]) or "no details"
        found.add("rubric", f"rubric judge: program does not match its spec: {issues}", flag=False)
    if found.reasons:
        v = "incorrect"
    elif no_oracle:
        v = "unverified"  # e.g. GEM envs: every other check ran, but without solve() solvability cannot be shown
    else:
        v = "correct"
    return Correctness(
        v, found.reasons, checker, oracle, degeneracy, dict(rubric) if rubric else None, notes=found.notes,
        probes=found.summary, warnings=found.warnings, findings=found.items,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ rubric judge
RUBRIC_SYSTEM = (
    "You review reinforcement-learning text environments. Compare the PROGRAM with its SPEC and check: the goal and "
    "success conditions match, every spec'd action is implemented, complexity parameters change the instance as "
    "described, the oracle follows a sound strategy, and malformed actions get feedback. Answer with one JSON "
    'object only: {"verdict": "pass" | "fail", "score": 0-10, "issues": ["..."]}.'
)


def judge_rubric(client: Any, entry: EnvEntry, max_source_chars: int = 12000, **sampling: Any) -> dict[str, Any]:
    """Ask an LLM whether the program implements its abstraction spec; returns a structured verdict dict."""
    if not entry.spec or not entry.source:
        return {"verdict": "skipped", "reason": "no spec.json or program to compare"}
    spec = json.dumps(entry.spec, indent=1)[:6000]
    user = f"SPEC:\n{spec}\n\nPROGRAM:\n```python\n{entry.source[:max_source_chars]}\n```"
    messages = [{"role": "system", "content": RUBRIC_SYSTEM}, {"role": "user", "content": user}]
    try:
        reply = client.complete(messages, **{"temperature": 0.0, "max_tokens": 400, **sampling})
    except Exception as err:
        return {"verdict": "error", "reason": f"{type(err).__name__}: {err}"[:300]}
    return parse_rubric(str(reply))


def parse_rubric(text: str) -> dict[str, Any]:
    """The first JSON object in a judge reply, validated; ``verdict: unparseable`` when there is none."""
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(obj, dict) and str(obj.get("verdict", "")).lower() in ("pass", "fail"):
            issues = obj.get("issues", [])
            score = obj.get("score")
            return {
                "verdict": str(obj["verdict"]).lower(),
                "score": float(score) if isinstance(score, int | float) else None,
                "issues": [str(i) for i in issues] if isinstance(issues, list) else [str(issues)],
            }
    return {"verdict": "unparseable", "raw": text[:500]}


__all__ = [
    "CHECK_TARGET",
    "CorrectnessConfig",
    "check_hosted",
    "collect_evidence",
    "judge_rubric",
    "parse_rubric",
    "verdict",
]
