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


@dataclass
class CheckResult:
    """Outcome of one check; `level`/`seed` are None for checks that do not depend on them."""

    name: str
    passed: bool
    reason: str = ""
    level: int | None = None
    seed: int | None = None
    #: Short traceback when the check failed because the env raised.
    traceback: str | None = None
    seconds: float = 0.0

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
    msg = str(err)
    if len(msg) > 300:
        msg = msg[:300] + "..."
    frames = _tb.format_exception(type(err), err, err.__traceback__, limit=-4)
    return CheckResult(
        name=name,
        passed=False,
        reason=f"{prefix}raised {type(err).__name__}: {msg}",
        level=level,
        seed=seed,
        traceback="".join(frames)[-3000:],
    )
