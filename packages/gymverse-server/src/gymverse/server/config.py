"""Settings of the environment server and the HTTP error it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

AgentGymDialect = Literal["id", "env_idx"]


class ApiError(Exception):
    """A request the server refuses: an HTTP status, a short machine-readable kind and a message naming the problem."""

    def __init__(self, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        """The JSON error body: ``{"error": kind, "message": ..., "status": ...}``."""
        return {"error": self.kind, "message": self.message, "status": self.status}


@dataclass(frozen=True)
class ServerConfig:
    """What `gymverse serve` serves and the limits it enforces.

    `envs` restricts the ids sessions may be opened on: exact ids (``game:Mastermind``) or whole families
    (``game`` or ``game:*``); None serves every registered env. An id that names another server
    (``remote+http://...``, any id holding ``://``) is served only when `envs` lists it exactly: otherwise any
    client could make this server connect wherever it likes (server-side request forgery).

    `workers` sizes the thread pool that runs blocking env calls (None: the pool's default). A connection must
    send its request headers within `header_timeout` seconds and its body within `body_timeout` seconds, else it
    is cut off (clients trickling bytes hold nothing). `agentgym` names the env served on AgentGym's root routes
    (``/create``, ``/step``, ...); AgentGym routes for any served env also live under ``/agentgym/{env_id}/``.
    """

    envs: tuple[str, ...] | None = None
    max_sessions: int = 4096
    idle_timeout: float = 600.0
    gc_interval: float | None = None
    step_timeout: float | None = 30.0
    max_action_bytes: int = 64 * 1024
    max_body_bytes: int = 16 * 1024 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_batch: int = 4096
    workers: int | None = None
    token: str | None = None
    agentgym: str | None = None
    agentgym_dialect: AgentGymDialect = "id"

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_action_bytes", "max_body_bytes", "max_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("idle_timeout", "gc_interval", "step_timeout", "header_timeout", "body_timeout"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive seconds, got {value!r}")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
        if self.token is not None and not self.token.strip():
            raise ValueError("token must not be blank")
        if self.agentgym_dialect not in ("id", "env_idx"):
            raise ValueError(f"agentgym_dialect must be 'id' or 'env_idx', got {self.agentgym_dialect!r}")

    @property
    def gc_every(self) -> float:
        """Seconds between idle-session sweeps."""
        return self.gc_interval if self.gc_interval is not None else min(max(self.idle_timeout / 4, 0.05), 5.0)

    def serves(self, env_id: str) -> bool:
        """Whether sessions may be opened on `env_id`."""
        from gymverse.registry import is_proxy_id

        if is_proxy_id(env_id):
            return self.envs is not None and env_id in self.envs
        if self.envs is None:
            return True
        family = env_id.split(":", 1)[0]
        return env_id in self.envs or family in self.envs or f"{family}:*" in self.envs

    def check_registry(self) -> None:
        """Raise ValueError naming each `envs` entry (or `agentgym`) that is no registered id or family."""
        from gymverse import registry

        if self.envs is None and self.agentgym is None:
            return  # nothing named: serving every env needs no registry lookup (nor every plugin loaded) yet
        known = registry.list_envs()
        families = sorted({k.split(":", 1)[0] for k in known})
        problems = []
        for entry in self.envs or ():
            if registry.is_proxy_id(entry):
                try:
                    registry.spec(entry)
                except registry.RegistryError as err:
                    problems.append(str(err))
            elif entry not in known and entry.removesuffix(":*") not in families:
                hint = registry.did_you_mean(entry, known if ":" in entry.removesuffix(":*") else families)
                problems.append(f"{entry!r} is neither a registered id nor a family{hint}")
        if problems:
            raise ValueError(f"envs: {'; '.join(problems)} (see `gymverse list`)")
        if self.agentgym is not None and (self.agentgym not in known or not self.serves(self.agentgym)):
            hint = registry.did_you_mean(self.agentgym, known)
            raise ValueError(f"agentgym: {self.agentgym!r} is not a served env id{hint}")
