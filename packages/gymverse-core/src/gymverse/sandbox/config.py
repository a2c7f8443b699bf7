"""Limits a sandboxed job runs under and the structured result it produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "memory", "killed"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "memory", "killed")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-job limits. Every limit is enforced by the kernel or the supervisor, not by inspecting the code.

    ``memory_mb`` is an address-space limit (``RLIMIT_AS``) and includes the interpreter itself (~30 MB for a
    fresh one, more for a pool worker that preloaded modules). ``max_processes`` caps processes *and* threads.
    ``max_output_bytes`` caps stdout and stderr each; the rest is drained and discarded, never buffered.
    ``cpu_seconds`` (default: ``timeout``) is rounded up to whole seconds, the granularity of ``RLIMIT_CPU``.
    """

    timeout: float = 10.0
    cpu_seconds: float | None = None
    memory_mb: int = 1024
    max_processes: int = 32
    file_size_mb: int = 16
    max_output_bytes: int = 64 * 1024
    network: bool = False

    def __post_init__(self) -> None:
        for name in ("timeout", "memory_mb", "max_processes", "file_size_mb", "max_output_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.cpu_seconds is not None and self.cpu_seconds <= 0:
            raise ValueError(f"SandboxLimits.cpu_seconds must be positive or None, got {self.cpu_seconds!r}")

    def to_spec(self) -> dict[str, Any]:
        """The plain dict the child applies (CPU time defaults to the wall-clock timeout)."""
        spec = asdict(self)
        spec["cpu_seconds"] = self.cpu_seconds if self.cpu_seconds is not None else self.timeout
        return spec


@dataclass
class SandboxResult:
    """Outcome of one sandboxed job.

    ``status``: ``ok`` (ran to completion), ``error`` (raised, or exited non-zero), ``timeout`` (wall clock or CPU
    time), ``memory`` (address-space limit), ``killed`` (died from a signal for another reason).
    ``return_value`` is JSON-serializable: the callable's result, or the value of the source's last expression when
    it can be serialized (``value_repr`` always holds its repr). ``isolation`` lists the measures actually applied.
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    return_value: Any = None
    value_repr: str | None = None
    error: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    wall_time: float = 0.0
    cpu_time: float = 0.0
    max_rss_kb: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    isolation: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the job ran to completion."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxResult:
        """Inverse of `to_dict`."""
        return cls(**data)
