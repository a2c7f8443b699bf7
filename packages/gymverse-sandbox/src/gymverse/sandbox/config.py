"""Limits a sandboxed job runs under and the structured result it produces."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
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
    ``max_open_files`` is ``RLIMIT_NOFILE``. ``disk_mb`` and ``max_files`` bound each private tmpfs (the work dir
    lives in the job's ``/tmp``) in bytes and inodes; they apply where the job has its own mount namespace.
    """

    timeout: float = 10.0
    cpu_seconds: float | None = None
    memory_mb: int = 1024
    max_processes: int = 32
    file_size_mb: int = 16
    max_output_bytes: int = 64 * 1024
    network: bool = False
    max_open_files: int = 256
    disk_mb: int = 64
    max_files: int = 8192

    def __post_init__(self) -> None:
        names = ("timeout", "memory_mb", "max_processes", "file_size_mb", "max_output_bytes")
        for name in (*names, "max_open_files", "disk_mb", "max_files"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.cpu_seconds is not None and self.cpu_seconds <= 0:
            raise ValueError(f"SandboxLimits.cpu_seconds must be positive or None, got {self.cpu_seconds!r}")

    def to_spec(self) -> dict[str, Any]:
        """The plain dict the child applies (CPU time defaults to the wall-clock timeout)."""
        spec = {f.name: getattr(self, f.name) for f in fields(self)}  # not `asdict`: no deep copies of numbers
        spec["cpu_seconds"] = self.cpu_seconds if self.cpu_seconds is not None else self.timeout
        return spec


@dataclass
class SandboxResult:
    """Outcome of one sandboxed job.

    ``status``: ``ok`` (ran to completion), ``error`` (raised, or exited non-zero), ``timeout`` (wall clock or CPU
    time), ``memory`` (address-space limit), ``killed`` (died from a signal for another reason).
    ``return_value`` is JSON-serializable: the callable's result, or the value of the source's last expression when
    it can be serialized (``value_repr`` always holds its repr). The status is derived by the job's monitor (a
    separate, trusted process) from how the job process exited; nothing the job writes can turn a failed run into
    ``ok``. The return value is whatever the job's process handed over before exiting with code 0, so a callable
    is only as trustworthy as every module it imports. ``isolation`` lists the measures actually applied (the
    first entry names the launcher: ``bwrap``, ``ctypes`` or ``zygote``).
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
