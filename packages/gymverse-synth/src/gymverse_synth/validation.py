"""Stage 3: validate a synthesized program. Static checks here, then the core checker and degeneracy in the sandbox.

Stages run in order and the first failing one ends validation: ``static`` (parses, allowed imports, no global RNG,
one `Env` subclass with the three hooks), ``load`` (the module executes and yields the class), ``checker`` (the core
checker at levels × seeds: determinism, complexity effect, oracle success, termination, reward range, ...) and
``degeneracy`` (a constant or a random policy must not succeed at levels >= 5). The last three run in one sandboxed
process under wall-clock, CPU and memory limits, so an infinite loop or a memory bomb costs one job, not the run.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Sequence
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
JOB = "gymverse_synth._validation_child:run_job"
PROGRESS = "@@gv "


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
    timeout: float = 120.0
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


# ------------------------------------------------------------------------------------------------ sandbox run
def _progress(stdout: str) -> list[dict[str, Any]]:
    import json

    events = []
    for line in stdout.splitlines():
        if line.startswith(PROGRESS):
            try:
                events.append(json.loads(line[len(PROGRESS) :]))
            except ValueError:
                continue
    return events


def _limit_failure(status: str, result: Any, config: ValidationConfig) -> ValidationFailure:
    """Explain a job the sandbox stopped: which check was running when it hit the limit."""
    events = _progress(result.stdout)
    last = events[-1] if events else None
    stage: Stage = "degeneracy" if last and last.get("phase") == "degeneracy" else "checker"
    if last is None:
        where = "before the first check completed (while loading the module or building the env)"
    elif last.get("phase") == "degeneracy":
        where = f"during a {last['policy']} policy episode at level {last['level']} seed {last['seed']}"
    else:
        loc = " ".join(f"{k}={last[k]}" for k in ("level", "seed") if last.get(k) is not None)
        where = f"right after check {last['name']!r}{' [' + loc + ']' if loc else ''} completed"
    level, seed = (last.get("level"), last.get("seed")) if last else (None, None)
    if status == "memory":
        reason = f"the program exceeded the {config.memory_mb} MB memory limit {where}"
        return ValidationFailure(stage=stage, check="memory", reason=reason, level=level, seed=seed)
    limit = f"{config.timeout:g} s wall clock" if config.cpu_seconds is None else "time limit"
    reason = (
        f"the program did not finish within the {limit} {where}: an episode, reset or step never returned "
        "(infinite loop?) or is far too slow"
    )
    return ValidationFailure(stage=stage, check="timeout", reason=reason, level=level, seed=seed)


def _sandbox_failures(child: dict[str, Any], config: ValidationConfig) -> tuple[Stage, list[ValidationFailure]]:
    if child.get("load_error"):
        return "load", [ValidationFailure(stage="load", check="load", reason=str(child["load_error"]))]
    if child.get("memory_error"):
        reason = f"the program hit the {config.memory_mb} MB memory limit: check {child['memory_error']}"
        failure = ValidationFailure(
            stage="checker", check="memory", reason=reason, level=child.get("level"), seed=child.get("seed")
        )
        return "checker", [failure]
    # checks the checker skipped because an earlier one failed add noise, not information
    failures = [
        ValidationFailure(
            stage="checker",
            check=r["name"],
            reason=r["reason"],
            level=r.get("level"),
            seed=r.get("seed"),
            traceback=r.get("traceback"),
        )
        for r in child.get("checker", {}).get("results", [])
        if not r["passed"] and not str(r["reason"]).startswith(("skipped:", "not judged:"))
    ]
    if failures:
        return "checker", failures
    deg = [ValidationFailure.model_validate(f) for f in child.get("degeneracy_failures", [])]
    return ("degeneracy", deg) if deg else ("accepted", [])


def validate_program(source: str, config: ValidationConfig | None = None) -> ValidationReport:
    """Validate `source` (the text of an env module): static checks, then checker and degeneracy in the sandbox."""
    from gymverse.sandbox import Sandbox, SandboxLimits

    config = config or ValidationConfig()
    started = time.perf_counter()
    static = static_check(source)
    if static:
        return ValidationReport(passed=False, stage="static", failures=static, seconds=_since(started))
    limits = SandboxLimits(
        timeout=config.timeout,
        cpu_seconds=config.cpu_seconds,
        memory_mb=config.memory_mb,
        max_output_bytes=4 * 1024 * 1024,
    )
    kwargs = {
        "source": source,
        "levels": list(config.levels),
        "seeds": list(config.seeds),
        "degeneracy_levels": list(config.degeneracy_levels),
        "degeneracy_seeds": list(config.degeneracy_seeds),
        "degeneracy_max_rate": config.degeneracy_max_rate,
        "max_steps": config.max_steps,
    }
    result = Sandbox(limits).call(JOB, kwargs=kwargs)
    box = {
        "status": result.status,
        "wall_time": round(result.wall_time, 3),
        "cpu_time": round(result.cpu_time, 3),
        "max_rss_kb": result.max_rss_kb,
    }
    if result.status in ("timeout", "memory"):
        failure = _limit_failure(result.status, result, config)
        return _report(False, failure.stage, [failure], {}, box, started)
    child = result.return_value
    if result.status != "ok" or not isinstance(child, dict):
        tail = (result.stderr or "")[-1500:]
        reason = f"the sandboxed validation job ended with status {result.status}: {result.error or ''}".strip()
        failure = ValidationFailure(stage="sandbox", check="sandbox_crash", reason=reason, traceback=tail or None)
        return _report(False, "sandbox", [failure], {}, box, started)
    stage, failures = _sandbox_failures(child, config)
    report = _report(not failures, stage, failures, child, box, started)
    return report


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def _report(
    passed: bool,
    stage: Stage,
    failures: Sequence[ValidationFailure],
    child: dict[str, Any],
    box: dict[str, Any],
    started: float,
) -> ValidationReport:
    results = child.get("checker", {}).get("results", [])
    return ValidationReport(
        passed=passed,
        stage=stage,
        failures=list(failures),
        checks_passed=sum(1 for r in results if r["passed"]),
        checks_total=len(results),
        degeneracy=child.get("degeneracy", {}),
        sandbox=box,
        env_name=child.get("env_name"),
        seconds=_since(started),
    )


__all__ = [
    "ALLOWED_PACKAGES",
    "ValidationConfig",
    "ValidationFailure",
    "ValidationReport",
    "static_check",
    "validate_program",
]
