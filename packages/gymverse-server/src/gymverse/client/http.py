"""HTTP clients of ``gymverse serve`` (sync and async, httpx): every endpoint, retries with backoff, JSON errors.

Connection failures (refused, reset, timed out) are retried with exponential backoff and jitter. Retrying is safe
for every call: sessions are created under an idempotency key, and episode calls carry the session's call number
``seq``, so a call the server already ran is answered from its cache instead of running twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Generic, TypeVar

import httpx

R = TypeVar("R")


class RemoteError(RuntimeError):
    """The server refused a call: `status` is the HTTP status, `kind` its short error name."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"{message} (HTTP {status} {kind})")
        self.status = status
        self.kind = kind
        self.message = message


class RemoteConnectionError(ConnectionError):
    """The server could not be reached, even after the retries."""


def _decode(response: httpx.Response, missing_ok: bool) -> Any:
    if response.status_code < 400:
        return response.json()
    if missing_ok and response.status_code == 404:
        return None
    try:
        body = response.json()
        kind, message = str(body.get("error", "error")), str(body.get("message", body))
    except (ValueError, AttributeError):
        kind, message = "error", response.text[:500]
    raise RemoteError(response.status_code, kind, message)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


class _Endpoints(Generic[R]):
    """The protocol's calls, shared by the sync (R = result) and async (R = awaitable result) clients."""

    def _request(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> R:
        raise NotImplementedError

    def health(self) -> R:
        """``GET /health``."""
        return self._request("GET", "/health")

    def metrics(self) -> R:
        """``GET /metrics``."""
        return self._request("GET", "/metrics")

    def list_envs(self) -> R:
        """``GET /v1/envs``: metadata and complexity tables of the served envs."""
        return self._request("GET", "/v1/envs")

    def create_session(
        self,
        env_id: str,
        kwargs: dict[str, Any] | None = None,
        seed: int | None = None,
        complexity: int | None = None,
        idempotency_key: str | None = None,
    ) -> R:
        """Open a session; the same `idempotency_key` returns the same session (``created: false``)."""
        body = {"env_id": env_id, "kwargs": kwargs or {}, "seed": seed, "complexity": complexity}
        return self._request("POST", "/v1/sessions", {**body, "idempotency_key": idempotency_key})

    def reset(
        self, session_id: str, seed: int | None = None, complexity: int | None = None, seq: int | None = None
    ) -> R:
        """Start an episode (at `complexity`, when given)."""
        return self._request(
            "POST", f"/v1/sessions/{session_id}/reset", {"seed": seed, "complexity": complexity, "seq": seq}
        )

    def step(self, session_id: str, action: str, seq: int | None = None) -> R:
        """Apply one text action."""
        return self._request("POST", f"/v1/sessions/{session_id}/step", {"action": action, "seq": seq})

    def batch(self, calls: Sequence[dict[str, Any]]) -> R:
        """Many calls in one request: ``{"op": "step", "session_id", "action"}`` or ``{"op": "reset", "session_id",
        "seed"?, "complexity"?}`` (each may carry ``seq``); returns ``{"results": [...]}`` in the same order."""
        return self._request("POST", "/v1/batch", {"calls": list(calls)})

    def step_many(self, steps: Sequence[tuple[str, str]]) -> R:
        """Step many sessions in one request: ``[(session_id, action), ...]`` -> ``{"results": [...]}``."""
        return self.batch([{"op": "step", "session_id": sid, "action": action} for sid, action in steps])

    def state(self, session_id: str) -> R:
        """``GET /v1/sessions/{id}``: episode, turn, last observation and info, call count."""
        return self._request("GET", f"/v1/sessions/{session_id}")

    def observation(self, session_id: str) -> R:
        """The session's latest observation."""
        return self._request("GET", f"/v1/sessions/{session_id}/observation")

    def set_complexity(self, session_id: str, level: int, seq: int | None = None) -> R:
        """Use `level` from the session's next reset on."""
        return self._request("POST", f"/v1/sessions/{session_id}/complexity", {"level": level, "seq": seq})

    def close_session(self, session_id: str) -> R:
        """Close a session (a session that is already gone counts as closed)."""
        return self._request("DELETE", f"/v1/sessions/{session_id}", missing_ok=True)


class _Retrying:
    def __init__(self, url: str, token: str | None, timeout: float, retries: int, backoff: float) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def _backoff(self, attempt: int, method: str, path: str, err: Exception) -> float:
        """Seconds to wait before retrying after failed `attempt` (exponential, jittered); raises when out of tries."""
        if attempt == self.retries:
            what = f"{method} {self.url}{path} failed after {self.retries + 1} attempts"
            raise RemoteConnectionError(f"{what}: {type(err).__name__}: {err}") from err
        return float(min(self.backoff * 2**attempt, 2.0) * (0.5 + random.random()))


class RemoteClient(_Retrying, _Endpoints[Any]):
    """Blocking client (thread-safe; keeps connections alive). Close it, or use it as a context manager."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.05,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, token, timeout, retries, backoff)
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport)

    def _request(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, json=body)
            except httpx.TransportError as err:
                time.sleep(self._backoff(attempt, method, path, err))
                continue
            return _decode(response, missing_ok)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> RemoteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteClient(_Retrying, _Endpoints[Awaitable[Any]]):
    """Asyncio client; one instance serves many sessions concurrently over a pool of kept-alive connections."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.05,
        max_connections: int = 100,
    ) -> None:
        super().__init__(url, token, timeout, retries, backoff)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout, limits=limits)

    async def _request(self, method: str, path: str, body: Any = None, missing_ok: bool = False) -> Any:
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, path, json=body)
            except httpx.TransportError as err:
                await asyncio.sleep(self._backoff(attempt, method, path, err))
                continue
            return _decode(response, missing_ok)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRemoteClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
