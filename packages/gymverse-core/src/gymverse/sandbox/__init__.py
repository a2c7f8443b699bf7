"""Run untrusted Python under real limits: a fresh process per job (`Sandbox`) or a warm pool (`SandboxPool`)."""

from gymverse.sandbox.config import STATUSES, SandboxLimits, SandboxResult, Status
from gymverse.sandbox.pool import SandboxPool
from gymverse.sandbox.runner import Sandbox, isolation_support

__all__ = ["STATUSES", "Sandbox", "SandboxLimits", "SandboxPool", "SandboxResult", "Status", "isolation_support"]
