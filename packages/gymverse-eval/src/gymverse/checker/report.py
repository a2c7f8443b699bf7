"""Result records of the env checker: `CheckResult` (one check) and `CheckReport` (all checks of one target).

Both are plain dataclasses that round-trip through JSON, so a checker run inside a sandbox subprocess can hand its
report back to the parent as text.
"""

from __future__ import annotations

import json
import traceback as _tb
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

#: What a result's `status` may be: the check passed, failed on the env's behaviour, failed because the env raised,
#: was not run because an earlier check failed, or was not judged because the call it needed raised.
STATUSES = ("pass", "fail", "error", "skipped", "not_judged")
#: How much a failure counts: a ``defect`` makes an env incorrect, a ``warning`` is reported only.
SEVERITIES = ("defect", "warning")
#: How much of an env's own text (an exception message) a reason quotes.
QUOTE_LIMIT = 300


def quote(text: object, limit: int = QUOTE_LIMIT) -> str:
    """`text` as a bounded Python literal: env text inside a reason is data, never read back as our own words."""
    value = str(text)
    cut = value if len(value) <= limit else value[:limit]
    return repr(cut) + ("..." if len(value) > limit else "")


@dataclass
class CheckResult:
    """Outcome of one check; `level`/`seed` are None for checks that do not depend on them.

    Verdicts are computed from the structured fields (`status`, `error_type`, `severity`), never from `reason`,
    which is prose for people and may quote the env's own text.
    """

    name: str
    passed: bool
    reason: str = ""
    level: int | None = None
    seed: int | None = None
    #: Short traceback when the check failed because the env raised.
    traceback: str | None = None
    seconds: float = 0.0
    #: One of `STATUSES`; empty: derived from `passed` (``pass`` / ``fail``).
    status: str = ""
    #: The type of the exception the env raised (status ``error``): its remote type for a hosted env.
    error_type: str | None = None
    severity: str = "defect"

    def __post_init__(self) -> None:
        if self.status not in STATUSES or (self.status == "pass") != self.passed:
            self.status = "pass" if self.passed else "fail"
        if self.severity not in SEVERITIES:
            self.severity = "defect"

    @property
    def where(self) -> str:
        """Human-readable location such as ``level=10 seed=2`` (empty for global checks)."""
        parts = []
        if self.level is not None:
            parts.append(f"level={self.level}")
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        """Inverse of `to_dict`."""
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            reason=str(data.get("reason", "")),
            level=data.get("level"),
            seed=data.get("seed"),
            traceback=data.get("traceback"),
            seconds=float(data.get("seconds", 0.0)),
            status=str(data.get("status", "")),
            error_type=None if data.get("error_type") is None else str(data["error_type"])[:100],
            severity=str(data.get("severity", "defect")),
        )


@dataclass
class CheckReport:
    """Every check result for one target (an env id, class, factory or file)."""

    target: str
    results: list[CheckResult] = field(default_factory=list)
    #: Run settings and facts about the env (levels, seeds, env name, total seconds).
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when every check passed (and at least one ran)."""
        return bool(self.results) and all(r.passed for r in self.results)

    def failures(self) -> list[CheckResult]:
        """The failed results, in run order."""
        return [r for r in self.results if not r.passed]

    def by_name(self, name: str) -> list[CheckResult]:
        """All results of the check called `name`."""
        return [r for r in self.results if r.name == name]

    def failed_names(self) -> list[str]:
        """Names of the checks with at least one failure, in run order, without repeats."""
        return list(dict.fromkeys(r.name for r in self.failures()))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return {
            "target": self.target,
            "passed": self.passed,
            "meta": dict(self.meta),
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckReport:
        """Inverse of `to_dict` (the derived `passed` field is recomputed, not trusted)."""
        return cls(
            target=str(data["target"]),
            results=[CheckResult.from_dict(r) for r in data.get("results", [])],
            meta=dict(data.get("meta", {})),
        )

    def to_json(self) -> str:
        """The report as a JSON string (what a sandboxed checker prints for its parent)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> CheckReport:
        """Inverse of `to_json`."""
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        """A few lines: the verdict, then each failing check with its first reason and where it failed."""
        n_fail = len(self.failures())
        verdict = "PASSED" if self.passed else "FAILED"
        lines = [f"{self.target}: {verdict} ({len(self.results) - n_fail}/{len(self.results)} checks passed)"]
        counts = Counter(r.name for r in self.failures())
        for name in self.failed_names():
            first = next(r for r in self.failures() if r.name == name)
            where = f" [{first.where}]" if first.where else ""
            more = f" (+{counts[name] - 1} more)" if counts[name] > 1 else ""
            lines.append(f"  FAIL {name}{where}: {first.reason}{more}")
        return "\n".join(lines)


def crash_result(
    name: str, err: BaseException, level: int | None = None, seed: int | None = None, context: str = ""
) -> CheckResult:
    """A failed result for a check that raised: type, message and the last few frames of the traceback."""
    prefix = f"{context}: " if context else ""
    kind = error_type(err)
    frames = _tb.format_exception(type(err), err, err.__traceback__, limit=-4)
    return CheckResult(
        name=name,
        passed=False,
        reason=f"{prefix}raised {kind}: {quote(err)}",
        level=level,
        seed=seed,
        traceback="".join(frames)[-3000:],
        status="error",
        error_type=kind,
    )


def describe_error(err: BaseException, limit: int = QUOTE_LIMIT) -> str:
    """``Type: 'message'``: the exception's (remote) type and its message as a bounded literal (`quote`)."""
    return f"{error_type(err)}: {quote(err, limit)}"


def error_type(err: BaseException) -> str:
    """The name of `err`'s type; for a hosted env's exception, the remote type it was raised as."""
    from gymverse.sandbox.hosted import EnvCallError

    if isinstance(err, EnvCallError):
        return err.remote_type
    return type(err).__name__
