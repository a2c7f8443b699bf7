"""Client leases: what the server holds for each HTTP session (``/v1/sessions/{id}``) a client opened.

A `ClientLease` is not a `gymverse.rollout.Session` (the episode handle a loop drives): it holds one, a pool
`PoolSession` (fault isolation, step timeouts), behind a per-lease lock, plus what the server answers from: the
episode counters, the client's call count ``seq`` with the last answer to replay, the idle clock that expires it.
`LeaseManager` opens, steps, expires and closes them.

Every mutating call may carry ``seq``, the client's count of the calls it made on the session. A retried call
(same ``seq`` as the last one) gets the cached answer instead of running twice, so a client may retry a step after
a dropped connection without stepping the env twice; a ``seq`` that skips or goes back is a 409.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gymverse import registry
from gymverse.pool import EnvPool, PoolSession, VectorError
from gymverse.server.config import ApiError, ServerConfig
from gymverse.server.metrics import Metrics

RESERVED_KWARGS = ("seed", "complexity")
_GONE_MEMORY = 10_000


@dataclass(eq=False)
class ClientLease:
    """One client's open HTTP session: its pool session and what the server remembers about its episode."""

    id: str
    env_id: str
    kwargs: dict[str, Any]
    handle: PoolSession
    key: str | None = None
    agentgym_id: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    episode: int = 0
    turn: int = 0
    ended: bool = True
    pending_complexity: int | None = None
    observation: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    episode_return: float = 0.0
    seq: int = 0
    replay: tuple[str, int, dict[str, Any]] | None = None

    def describe(self) -> dict[str, Any]:
        """The ``GET /v1/sessions/{id}`` document."""
        now = time.monotonic()
        return {
            "session_id": self.id,
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "episode": self.episode,
            "turn": self.turn,
            "ended": self.ended,
            "complexity": self.info.get("complexity"),
            "pending_complexity": self.pending_complexity,
            "observation": self.observation,
            "info": self.info,
            "episode_return": self.episode_return,
            "seq": self.seq,
            "age_s": round(now - self.created, 3),
            "idle_s": round(now - self.last_used, 3),
            "agentgym_id": self.agentgym_id,
        }


def describe_env(env_id: str) -> dict[str, Any]:
    """Metadata and complexity table of one registered env (for ``GET /v1/envs``)."""
    try:
        cls = registry.env_class(env_id)
        spec = cls.complexity_spec()
        return {
            "id": env_id,
            "metadata": cls.metadata.to_dict(),
            "complexity_params": {str(level): params for level, params in spec.table().items()},
        }
    except Exception as err:  # a broken plugin is listed with its error, not hidden and not fatal
        return {"id": env_id, "error": f"{type(err).__name__}: {err}"}


#: Arguments of a proxied (remote+) env that say where and how it connects: the operator's, never a client's.
PROXY_ARGS = frozenset({"url", "env_id", "token", "timeout", "retries", "idempotency_key", "session_id"})


class LeaseManager:
    """Opens, steps, collects idle and closes client leases; enforces the session limit and the action size limit."""

    def __init__(self, config: ServerConfig) -> None:
        config.check_registry()  # an entry naming nothing (a typo, an old spelling) fails here, not per request
        self.config = config
        self.pool = EnvPool(config.max_sessions, max_workers=config.workers, step_timeout=config.step_timeout)
        self.leases: dict[str, ClientLease] = {}
        self.metrics = Metrics()
        self.draining = False
        self._keys: dict[str, tuple[str, tuple[Any, ...]]] = {}
        self._agentgym: dict[int, str] = {}
        self._agentgym_ids = itertools.count()
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._opening = 0
        self._signatures: dict[str, inspect.Signature | None] = {}
        self._env_docs: list[dict[str, Any]] | None = None
        self._one_docs: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ envs
    def served_envs(self) -> list[str]:
        """Registered ids this server opens sessions on."""
        return [e for e in registry.list_envs() if self.config.serves(e)]

    def describe_envs(self) -> list[dict[str, Any]]:
        """Metadata of every served env (computed once)."""
        if self._env_docs is None:
            self._env_docs = [describe_env(e) for e in self.served_envs()]
        return self._env_docs

    def describe(self, env_id: str) -> dict[str, Any]:
        """Metadata of one env (computed once; not every served env's, which would import every installed suite)."""
        if self._env_docs is not None:
            found = next((d for d in self._env_docs if d["id"] == env_id), None)
            if found is not None:
                return found
        if env_id not in self._one_docs:
            self._one_docs[env_id] = describe_env(env_id) if not registry.is_proxy_id(env_id) else {"id": env_id}
        return self._one_docs[env_id]

    def _check_env(self, env_id: str, kwargs: Mapping[str, Any]) -> None:
        if not self.config.serves(env_id):
            raise ApiError(404, "unknown_env", f"env {env_id!r} is not served here (see GET /v1/envs)")
        try:
            spec = registry.spec(env_id)
        except registry.RegistryError as err:
            raise ApiError(404, "unknown_env", str(err)) from None
        reserved = sorted(set(kwargs) & set(RESERVED_KWARGS))
        if reserved:
            raise ApiError(400, "bad_kwargs", f"pass {', '.join(reserved)} as top-level fields, not in kwargs")
        proxy_args = set(spec.defaults) | PROXY_ARGS
        steering = sorted(set(kwargs) & proxy_args) if registry.is_proxy_id(env_id) else []
        if steering:  # where a proxied env connects, and with which credentials, is the operator's choice
            raise ApiError(400, "bad_kwargs", f"{', '.join(steering)} of {env_id!r} are fixed by the server")
        if env_id not in self._signatures:
            try:
                self._signatures[env_id] = inspect.signature(spec.load())
            except (TypeError, ValueError):
                self._signatures[env_id] = None  # a builtin or C factory: nothing to check ahead of time
            except registry.RegistryError as err:
                raise ApiError(500, "env_unavailable", str(err)) from None
        sig = self._signatures[env_id]
        if sig is not None:
            try:
                sig.bind_partial(**{**spec.defaults, **kwargs})
            except TypeError as err:
                raise ApiError(400, "bad_kwargs", f"kwargs do not fit {env_id}: {err}") from None

    # ------------------------------------------------------------------ lifecycle
    async def create(
        self,
        env_id: str,
        kwargs: dict[str, Any],
        seed: int | None,
        complexity: int | None,
        key: str | None = None,
        agentgym: bool = False,
    ) -> tuple[ClientLease, bool]:
        """Open a session (or return the one already opened under idempotency `key`); True when new."""
        request = (env_id, json.dumps(kwargs, sort_keys=True), seed, complexity)
        if key is not None and key in self._keys:
            return self._replay(key, request), False
        self._check_env(env_id, kwargs)
        limit = self.config.max_sessions
        if len(self.leases) + self._opening >= limit:
            raise ApiError(
                429,
                "too_many_sessions",
                f"the server holds its limit of {limit} sessions; close some or retry later",
                {"Retry-After": "1"},
            )
        self._opening += 1
        try:
            # A proxied env never inherits a token from this process's environment (it may be this server's own).
            extra = {"token": ""} if registry.is_proxy_id(env_id) else {}
            handle = await self.pool.session(env_id, seed=seed, complexity=complexity, **kwargs, **extra)
        except registry.RegistryError as err:
            raise ApiError(404, "unknown_env", str(err)) from None
        finally:
            self._opening -= 1
        if key is not None and key in self._keys:  # a concurrent retry of the same create won the race
            await handle.close()
            return self._replay(key, request), False
        session = ClientLease(secrets.token_urlsafe(18), env_id, dict(kwargs), handle, key=key)
        session.pending_complexity = complexity
        if agentgym:
            session.agentgym_id = next(self._agentgym_ids)
            self._agentgym[session.agentgym_id] = session.id
        self.leases[session.id] = session
        if key is not None:
            self._keys[key] = (session.id, request)
        self.metrics.sessions_created += 1
        return session, True

    def _replay(self, key: str, request: tuple[Any, ...]) -> ClientLease:
        """The session opened under idempotency `key`, if `request` is the one that opened it (else 422)."""
        session_id, first = self._keys[key]
        if request != first:
            raise ApiError(
                422,
                "idempotency_key_reused",
                f"idempotency_key {key!r} already opened a session with a different env_id, kwargs, seed or "
                "complexity; use a new key for a different request",
            )
        return self.leases[session_id]

    def get(self, session_id: str) -> ClientLease:
        """The open session `session_id`, else 404 (saying why, when it was closed or collected)."""
        session = self.leases.get(session_id)
        if session is None:
            why = self._gone.get(session_id)
            if why is not None:
                raise ApiError(404, "unknown_session", f"session {session_id!r} {why}")
            raise ApiError(404, "unknown_session", f"no session {session_id!r} (never opened, or long gone)")
        return session

    def agentgym_sessions(self) -> list[tuple[int, ClientLease]]:
        """Open sessions created through the AgentGym routes, with their integer ids."""
        return [(i, self.leases[sid]) for i, sid in self._agentgym.items() if sid in self.leases]

    def get_agentgym(self, agentgym_id: int) -> ClientLease:
        """The session behind an AgentGym integer id."""
        sid = self._agentgym.get(agentgym_id)
        if sid is None:
            raise ApiError(404, "unknown_session", f"no environment with id {agentgym_id}")
        return self.get(sid)

    async def close(self, session: ClientLease, reason: str = "was closed") -> None:
        """Close `session` (new calls on it get 404 at once; an in-flight call finishes first)."""
        if self.leases.pop(session.id, None) is None:
            return
        if session.key is not None:
            self._keys.pop(session.key, None)
        if session.agentgym_id is not None:
            self._agentgym.pop(session.agentgym_id, None)
        self._gone[session.id] = reason
        while len(self._gone) > _GONE_MEMORY:
            self._gone.popitem(last=False)
        async with session.lock:
            await session.handle.close()
        self.metrics.sessions_closed += 1

    async def collect_idle(self) -> int:
        """Close sessions idle for longer than ``idle_timeout``; returns how many."""
        timeout = self.config.idle_timeout
        cutoff = time.monotonic() - timeout
        idle = [s for s in self.leases.values() if s.last_used < cutoff and not s.lock.locked()]
        for session in idle:
            await self.close(session, f"was closed after {timeout:g} s idle")
        self.metrics.sessions_collected += len(idle)
        return len(idle)

    async def gc_loop(self) -> None:
        """Sweep idle sessions forever (cancelled at shutdown)."""
        while True:
            await asyncio.sleep(self.config.gc_every)
            await self.collect_idle()

    async def shutdown(self) -> None:
        """Refuse new work, close every session and the pool."""
        self.draining = True
        for session in list(self.leases.values()):
            await self.close(session, "was closed: the server shut down")
        self.pool.close()

    # ------------------------------------------------------------------ episode calls
    def _begin(self, session: ClientLease, op: str, seq: int | None) -> dict[str, Any] | None:
        """Sequence check; the cached answer when this call repeats the last one."""
        session.last_used = time.monotonic()
        if seq is None:
            session.seq += 1
            return None
        if session.replay is not None and seq == session.seq and session.replay[:2] == (op, seq):
            return session.replay[2]
        if seq != session.seq + 1:
            raise ApiError(
                409, "seq_mismatch", f"call number {seq} on session {session.id!r}, expected {session.seq + 1}"
            )
        session.seq = seq
        return None

    def _end(self, session: ClientLease, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        payload["seq"] = session.seq
        session.replay = (op, session.seq, payload)
        session.last_used = time.monotonic()
        return payload

    async def reset(
        self, session: ClientLease, seed: int | None, complexity: int | None, seq: int | None = None
    ) -> dict[str, Any]:
        """Start an episode; a failing env gives an error-truncated episode (``env_error``), not an HTTP error."""
        async with session.lock:
            cached = self._begin(session, "reset", seq)
            if cached is not None:
                return cached
            if complexity is not None:
                session.handle.set_complexity(complexity)
                session.pending_complexity = complexity
            obs, info = await session.handle.reset(seed)
            failed = bool(info.get("reset_failed"))
            session.episode += 1
            session.turn = 0
            session.ended = failed
            session.pending_complexity = None
            session.observation, session.info, session.reward, session.episode_return = obs, info, 0.0, 0.0
            self.metrics.resets_total += 1
            if failed:
                self.metrics.env_errors[str(info.get("error_type", "error"))] += 1
            return self._end(session, "reset", {"observation": obs, "info": info, "env_error": info.get("error")})

    def check_action(self, action: Any) -> str:
        """The action text, or 400 (not a string) / 413 (longer than ``max_action_bytes``)."""
        if not isinstance(action, str):
            raise ApiError(400, "bad_request", f"'action' must be a string, got {type(action).__name__}")
        limit = self.config.max_action_bytes
        if len(action) > limit // 4 and len(action.encode("utf-8", "surrogatepass")) > limit:
            raise ApiError(
                413,
                "action_too_large",
                f"action of {len(action.encode('utf-8', 'surrogatepass'))} bytes exceeds the limit of {limit} bytes",
            )
        return action

    async def step(self, session: ClientLease, action: str, seq: int | None = None) -> dict[str, Any]:
        """Apply one action; 409 once the episode is over. Env failures end the episode with ``env_error``."""
        async with session.lock:
            cached = self._begin(session, "step", seq)
            if cached is not None:
                return cached
            if session.ended:
                what = "has not started" if session.episode == 0 else "is over"
                raise ApiError(409, "episode_over", f"the episode of session {session.id!r} {what}; reset it first")
            t0 = time.perf_counter()
            try:
                obs, reward, terminated, truncated, info = await session.handle.step(action)
            except VectorError as err:
                raise ApiError(409, "episode_over", str(err)) from None
            error = info.get("error")
            self.metrics.step_done(time.perf_counter() - t0, info.get("error_type") if error is not None else None)
            session.turn += 1
            session.ended = bool(terminated or truncated)
            session.observation, session.info = obs, info
            session.reward = float(reward)
            session.episode_return += session.reward
            payload = {
                "observation": obs,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": info,
                "env_error": error,
            }
            return self._end(session, "step", payload)

    async def set_complexity(self, session: ClientLease, level: int, seq: int | None = None) -> dict[str, Any]:
        """Record `level` for the session's next reset."""
        async with session.lock:
            cached = self._begin(session, "complexity", seq)
            if cached is not None:
                return cached
            session.handle.set_complexity(level)
            session.pending_complexity = level
            return self._end(session, "complexity", {"pending_complexity": level})

    async def batch(self, items: list[tuple[str, str, Any, int | None]]) -> list[dict[str, Any]]:
        """Run many calls at once: ``(op, session_id, arg, seq)`` with op ``"step"`` (arg: the action) or ``"reset"``
        (arg: ``(seed, complexity)``). Each result is that call's payload or its own error."""

        async def one(op: str, session_id: str, arg: Any, seq: int | None) -> dict[str, Any]:
            try:
                session = self.get(session_id)
                if op == "step":
                    payload = await self.step(session, self.check_action(arg), seq)
                else:
                    payload = await self.reset(session, arg[0], arg[1], seq)
            except ApiError as err:
                self.metrics.http_errors[err.status] += 1
                return {"session_id": session_id, "op": op, "ok": False, **err.body()}
            return {"session_id": session_id, "op": op, "ok": True, **payload}

        return list(await asyncio.gather(*(one(*item) for item in items)))
