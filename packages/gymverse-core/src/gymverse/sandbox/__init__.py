"""Run untrusted Python under real limits: a fresh process per job (`Sandbox`) or a warm pool (`SandboxPool`)."""

# The wire format's nesting limit, public for the other transports that share it (the MCP tool).
from gymverse.sandbox._protocol import MAX_DEPTH as MAX_JSON_DEPTH
from gymverse.sandbox._protocol import depth as json_depth
from gymverse.sandbox.config import STATUSES, SandboxLimits, SandboxResult, Status
from gymverse.sandbox.pool import SandboxPool
from gymverse.sandbox.runner import Sandbox, isolation_support

__all__ = [
    "MAX_JSON_DEPTH",
    "STATUSES",
    "Sandbox",
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "Status",
    "isolation_support",
    "json_depth",
]
