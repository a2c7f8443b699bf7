"""Stage 3: validate a synthesized program. Static checks, then the core checker and degeneracy against the program
hosted in a sandbox.

Stages run in order and the first failing one ends validation: ``static`` (parses, allowed imports, no global RNG,
one `Env` subclass with the three hooks), ``load`` (the module executes and yields the class), ``checker`` (the core
checker at levels × seeds: determinism, complexity effect, oracle success, termination, reward range, ...) and
``degeneracy`` (a constant or a random policy must not succeed at levels >= 5). The program runs in one sandboxed
env host (`gymverse.sandbox.hosted.EnvHost`) under wall-clock, CPU and memory limits; the checker and the
degeneracy policies run here and drive it call by call, so an infinite loop or a memory bomb costs one host, and
a program that rewrites the checker or prints a forged report only rewrites its own process.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from gymverse_synth.construction import ALLOWED_STDLIB

Stage = Literal["static", "load", "checker", "degeneracy", "sandbox", "accepted"]
ALLOWED_PACKAGES = frozenset({"numpy", "gymverse"})
FORBIDDEN_CALLS = frozenset({"eval", "exec", "compile", "open", "__import__", "input", "breakpoint", "globals"})
FORBIDDEN_ATTRS = frozenset({"__subclasses__", "__globals__", "__builtins__", "__code__", "__bases__", "__mro__"})
#: `numpy.random` names that do not touch the global RNG.
SAFE_NP_RANDOM = frozenset({"default_rng", "Generator"})
REQUIRED_METHODS = ("_reset", "_step", "solve")


class ValidationFailure(BaseModel):
    """One reason a program was rejected: the stage, the check's name, and where it failed."""

    stage: Stage
    check: str
    reason: str
    level: int | None = None
    seed: int | None = None
    line: int | None = None
    traceback: str | None = None

    def describe(self) -> str:
        """One line naming the check, its location and the reason."""
        where = " ".join(
            f"{k}={v}" for k, v in (("line", self.line), ("level", self.level), ("seed", self.seed)) if v is not None
        )
        return f"[{self.stage}/{self.check}{' ' + where if where else ''}] {self.reason}"


class ValidationReport(BaseModel):
    """The outcome of `validate_program` (``validation.json``): verdict, failing stage, failures and evidence."""

    passed: bool
    stage: Stage = Field(description="the stage that failed, or 'accepted'")
    failures: list[ValidationFailure] = Field(default_factory=list)
    checks_passed: int = 0
    checks_total: int = 0
    degeneracy: dict[str, Any] = Field(default_factory=dict, description="success rates of degenerate policies")
    sandbox: dict[str, Any] = Field(default_factory=dict, description="status, wall/cpu time, peak memory")
    env_name: str | None = None
    seconds: float = 0.0

    @property
    def failed_checks(self) -> list[str]:
        """Names of the failed checks, in order, without repeats."""
        return list(dict.fromkeys(f.check for f in self.failures))

    def reasons(self, limit: int = 12) -> list[str]:
        """Human (and LLM) readable failure lines, one per failed check (first occurrence), at most `limit`."""
        seen: dict[str, ValidationFailure] = {}
        counts: dict[str, int] = {}
        for f in self.failures:
            seen.setdefault(f.check, f)
            counts[f.check] = counts.get(f.check, 0) + 1
        lines = []
        for name, f in list(seen.items())[:limit]:
            more = f" (+{counts[name] - 1} more like it)" if counts[name] > 1 else ""
            lines.append(f.describe() + more)
        return lines

    def summary(self) -> str:
        """A one-line verdict."""
        if self.passed:
            return f"accepted ({self.checks_passed}/{self.checks_total} checks passed)"
        return f"rejected at {self.stage}: {', '.join(self.failed_checks)}"


@dataclass(frozen=True)
class ValidationConfig:
    """What validation runs and under which limits."""

    levels: tuple[int, ...] = (1, 5, 10)
    seeds: tuple[int, ...] = (0, 1, 2)
    degeneracy_levels: tuple[int, ...] = (5, 10)
    degeneracy_seeds: tuple[int, ...] = tuple(range(8))
    #: A degenerate policy succeeding more often than this at a level >= 5 rejects the env.
    degeneracy_max_rate: float = 0.25
    max_steps: int | None = None
    #: The whole validation's wall clock (the sandboxed host gets a few seconds more as a backstop).
    timeout: float = 120.0
    #: One call into the program (a reset, a step, building the env) must answer within this.
    call_timeout: float = 10.0
    cpu_seconds: float | None = None
    memory_mb: int = 1024

    def __post_init__(self) -> None:
        if any(lv < 5 for lv in self.degeneracy_levels):
            raise ValueError(f"degeneracy levels must be >= 5, got {self.degeneracy_levels}")
        if not 0 <= self.degeneracy_max_rate < 1:
            raise ValueError(f"degeneracy_max_rate must be in [0, 1), got {self.degeneracy_max_rate}")


# ----------------------------------------------------------------------------------------------- static checks
def _root(module: str) -> str:
    return module.split(".", 1)[0]


def _import_failures(tree: ast.Module) -> list[ValidationFailure]:
    out: list[ValidationFailure] = []
    allowed = set(ALLOWED_STDLIB) | ALLOWED_PACKAGES

    def bad(module: str, line: int) -> None:
        if _root(module) == "random":
            why = "the global `random` module is not allowed; draw every random number from self.rng"
        else:
            why = f"import of {module!r} is not allowed (allowed: numpy, gymverse.*, {', '.join(ALLOWED_STDLIB[1:])})"
        out.append(ValidationFailure(stage="static", check="imports", reason=why, line=line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _root(alias.name) not in allowed:
                    bad(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.append(
                    ValidationFailure(
                        stage="static", check="imports", reason="relative imports are not allowed", line=node.lineno
                    )
                )
            elif node.module is None or _root(node.module) not in allowed:
                bad(node.module or "?", node.lineno)
            elif node.module == "numpy.random" and any(a.name not in SAFE_NP_RANDOM for a in node.names):
                names = ", ".join(a.name for a in node.names if a.name not in SAFE_NP_RANDOM)
                out.append(_global_rng(f"numpy.random.{names}", node.lineno))
    return out


def _global_rng(what: str, line: int) -> ValidationFailure:
    reason = f"{what} uses the global numpy RNG; use self.rng (seeded per env) instead"
    return ValidationFailure(stage="static", check="global_rng", reason=reason, line=line)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _code_failures(tree: ast.Module) -> list[ValidationFailure]:
    out: list[ValidationFailure] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            reason = f"calling {node.func.id}() is not allowed in an environment program"
            out.append(ValidationFailure(stage="static", check="forbidden_call", reason=reason, line=node.lineno))
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRS:
                reason = f"attribute {node.attr} is not allowed in an environment program"
                out.append(
                    ValidationFailure(stage="static", check="forbidden_attribute", reason=reason, line=node.lineno)
                )
            dotted = _dotted(node)
            head, _, rest = dotted.partition(".random.")
            if head in ("np", "numpy") and rest and rest.split(".")[0] not in SAFE_NP_RANDOM:
                out.append(_global_rng(dotted, node.lineno))
    return out


def _is_env_base(base: ast.expr) -> bool:
    return (isinstance(base, ast.Name) and base.id == "Env") or (isinstance(base, ast.Attribute) and base.attr == "Env")


def _class_failures(tree: ast.Module) -> list[ValidationFailure]:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and any(_is_env_base(b) for b in n.bases)]
    if not classes:
        reason = "the program defines no class deriving from gymverse.core.Env"
        return [ValidationFailure(stage="static", check="env_class", reason=reason)]
    if len(classes) > 1:
        names = ", ".join(c.name for c in classes)
        return [
            ValidationFailure(stage="static", check="env_class", reason=f"define exactly one Env class, got {names}")
        ]
    cls = classes[0]
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    missing = [m for m in REQUIRED_METHODS if m not in methods]
    if missing:
        reason = f"class {cls.name} does not implement {', '.join(missing)}"
        return [ValidationFailure(stage="static", check="env_class", reason=reason, line=cls.lineno)]
    return []


def static_check(source: str) -> list[ValidationFailure]:
    """Static failures of `source`: syntax, imports, forbidden calls/attributes, global RNG, the Env class."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return [ValidationFailure(stage="static", check="syntax", reason=f"syntax error: {err.msg}", line=err.lineno)]
    except ValueError as err:  # null bytes
        return [ValidationFailure(stage="static", check="syntax", reason=f"cannot parse: {err}")]
    return _import_failures(tree) + _code_failures(tree) + _class_failures(tree)


# ------------------------------------------------------------------------------------------------ hosted run
HOST_FACTORY = "gymverse.loader:build_from_ref"
ENV_FILE = "env.py"


class _OutOfMemory(Exception):
    def __init__(self, result: Any) -> None:
        super().__init__(result.reason)
        self.result = result


def _episode(env: Any, seed: int, act: Callable[[Any], str], max_steps: int | None) -> bool:
    from gymverse.play import play  # imported late like the rest of gymverse here: this module is read at start-up

    return play(env, lambda e, _obs: act(e), seed=seed, max_steps=max_steps).reraise().success


def _constant(text: str) -> Callable[[Any], str]:
    return lambda env: text


def _random_action(env: Any) -> str:
    return str(env.sample_random_action())


def _degeneracy(
    make: Callable[[int], Any], config: ValidationConfig, where: list[str]
) -> tuple[dict[str, float], list[ValidationFailure]]:
    """Success rates of a constant and a random policy per level; a rate above the limit is a failure."""
    rates: dict[str, float] = {}
    failures: list[ValidationFailure] = []
    seeds = config.degeneracy_seeds
    for level in config.degeneracy_levels:
        probe = make(level)
        probe.reset(seed=seeds[0])
        # one fixed text for every state and seed: what an agent that ignores observations would send
        constant = str(probe.sample_random_action())
        policies: dict[str, Callable[[Any], str]] = {"constant": _constant(constant), "random": _random_action}
        for name, act in policies.items():
            wins = 0
            for seed in seeds:
                where[:] = [f"during a {name} policy episode at level {level} seed {seed}", "degeneracy"]
                try:
                    wins += _episode(make(level), seed, act, config.max_steps)
                except Exception as err:
                    reason = f"a {name} policy episode raised {type(err).__name__}: {str(err)[:300]}"
                    failures.append(
                        ValidationFailure(
                            stage="degeneracy", check="degenerate_crash", reason=reason, level=level, seed=seed
                        )
                    )
                    break
            rate = wins / len(seeds)
            rates[f"{name}@{level}"] = rate
            if rate > config.degeneracy_max_rate:
                what = f"the constant action {constant[:60]!r}" if name == "constant" else "uniformly random actions"
                reason = (
                    f"{what} succeeded in {wins}/{len(seeds)} episodes at level {level} "
                    f"(limit {config.degeneracy_max_rate:.0%}): the task can be won without solving it"
                )
                failures.append(
                    ValidationFailure(stage="degeneracy", check=f"degenerate_{name}", reason=reason, level=level)
                )
    return rates, failures


def _checker_failures(report: Any) -> list[ValidationFailure]:
    # checks the checker skipped because an earlier one failed add noise, not information
    return [
        ValidationFailure(
            stage="checker", check=r.name, reason=r.reason, level=r.level, seed=r.seed, traceback=r.traceback
        )
        for r in report.results
        if not r.passed and not str(r.reason).startswith(("skipped:", "not judged:"))
    ]


def _timeout_failure(err: BaseException, where: list[str], config: ValidationConfig) -> ValidationFailure:
    """Which call hung, and in which check: the last finished check (or degeneracy episode) says where."""
    stage: Stage = "degeneracy" if where and where[-1] == "degeneracy" else "checker"
    place = where[0] if where else "before the first check completed (while loading the module or building the env)"
    level, seed = (int(where[1]), int(where[2])) if len(where) == 4 else (None, None)
    reason = (
        f"the program did not finish within its time limit {place}: an episode, reset or step never returned "
        f"(infinite loop?) or is far too slow ({err})"
    )
    return ValidationFailure(stage=stage, check="timeout", reason=reason, level=level, seed=seed)


def _hosted_run(
    source: str, config: ValidationConfig, box: dict[str, Any]
) -> tuple[Stage, list[ValidationFailure], dict[str, Any]]:
    """Load, check and probe the program hosted in a sandbox; every verdict is computed here, in this process."""
    from gymverse.checker import CheckResult, check_env
    from gymverse.deadline import CallTimeout, deadline
    from gymverse.sandbox import SandboxLimits
    from gymverse.sandbox.hosted import EnvCallError, EnvHost

    limits = SandboxLimits(
        timeout=config.timeout + 5.0,  # the host's own backstop; the deadline below ends validation first
        cpu_seconds=config.cpu_seconds,
        memory_mb=config.memory_mb,
        max_output_bytes=256 * 1024,
    )
    where: list[str] = []
    evidence: dict[str, Any] = {}
    host = EnvHost(HOST_FACTORY, [f"file:{ENV_FILE}"], files={ENV_FILE: source}, limits=limits,
                   call_timeout=config.call_timeout, forked=True)  # fmt: skip

    def on_result(r: CheckResult) -> None:
        loc = " ".join(f"{k}={v}" for k, v in (("level", r.level), ("seed", r.seed)) if v is not None)
        where[:] = [f"right after check {r.name!r}{' [' + loc + ']' if loc else ''} completed", "checker"]
        if r.level is not None and r.seed is not None:
            where[1:] = [str(r.level), str(r.seed), "checker"]
        if r.error_type == "MemoryError":
            # the checker would go on hitting the limit check after check until the wall clock runs out
            raise _OutOfMemory(r)

    try:
        with deadline(config.timeout, "validation"):
            try:
                host.make(config.levels[0]).close()
            except EnvCallError as err:
                if err.remote_type == "EnvLoadError":
                    reason = str(err).replace(f"{ENV_FILE}:", "env.py:")
                    return "load", [ValidationFailure(stage="load", check="load", reason=reason)], evidence
            report = check_env(host.make, levels=config.levels, seeds=config.seeds, max_steps=config.max_steps,
                               on_result=on_result)  # fmt: skip
            evidence = {"checker": report, "env_name": report.meta.get("env_name")}
            failures = _checker_failures(report)
            if failures:
                return "checker", failures, evidence
            evidence["degeneracy"], deg = _degeneracy(host.make, config, where)
            return ("degeneracy", deg, evidence) if deg else ("accepted", [], evidence)
    except _OutOfMemory as oom:
        r = oom.result
        reason = f"the program hit the {config.memory_mb} MB memory limit: check {r.name} {r.reason}"
        box["status"] = "memory"
        return "checker", [ValidationFailure(stage="checker", check="memory", reason=reason, level=r.level,
                                             seed=r.seed)], evidence  # fmt: skip
    except CallTimeout as err:
        box["status"] = "timeout"
        failure = _timeout_failure(err, where, config)
        return failure.stage, [failure], evidence
    finally:
        host.close()
        res = host.result
        if res is not None:
            box.setdefault("status", res.status)
            box.update(wall_time=round(res.wall_time, 3), cpu_time=round(res.cpu_time, 3), max_rss_kb=res.max_rss_kb)
            box["isolation"] = res.isolation
        box["host_starts"] = host.starts
        box["audit"] = [list(a) for a in host.audit]  # what its code tried outside the box (gymverse.sandbox._audit)


def _unsafe_reason(attempts: list[list[str]]) -> str:
    shown = "; ".join(f"{kind} {detail}" for kind, detail in attempts[:5])
    return (
        f"the program tried to act outside its sandbox (files, environment, sockets, processes or native code): {shown}"
    )


def validate_program(source: str, config: ValidationConfig | None = None) -> ValidationReport:
    """Validate `source` (the text of an env module): static checks, then checker and degeneracy against the
    program hosted in a sandbox (`gymverse.sandbox.hosted`), every verdict computed in this process."""
    config = config or ValidationConfig()
    started = time.perf_counter()
    static = static_check(source)
    if static:
        return ValidationReport(passed=False, stage="static", failures=static, seconds=_since(started))
    box: dict[str, Any] = {}
    stage, failures, evidence = _hosted_run(source, config, box)
    if box.get("audit"):  # the program reached outside its box: rejected whatever else it did
        unsafe = ValidationFailure(stage="sandbox", check="unsafe", reason=_unsafe_reason(box["audit"]))
        stage, failures = ("sandbox", [unsafe, *failures]) if not failures else (stage, [*failures, unsafe])
    report = evidence.get("checker")
    results = report.results if report is not None else []
    return ValidationReport(
        passed=not failures,
        stage=stage,
        failures=failures,
        checks_passed=sum(1 for r in results if r.passed),
        checks_total=len(results),
        degeneracy=evidence.get("degeneracy", {}),
        sandbox=box,
        env_name=evidence.get("env_name"),
        seconds=_since(started),
    )


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


__all__ = [
    "ALLOWED_PACKAGES",
    "ValidationConfig",
    "ValidationFailure",
    "ValidationReport",
    "static_check",
    "validate_program",
]
