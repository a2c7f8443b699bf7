"""The FastAPI app of ``gymverse serve``: one session protocol for every env, plus AgentGym-compatible routes.

Routes (all JSON; errors are ``{"error": kind, "message": ..., "status": ...}`` with a real HTTP status):

* ``GET /`` (served envs and routes; HTML for a browser), ``GET /{env_id}`` (one env and how to use it)
* ``GET /health`` (never needs the token), ``GET /metrics``, ``GET /v1/envs``
* ``POST /v1/sessions`` ``{env_id, kwargs?, seed?, complexity?, idempotency_key?}`` -> ``{session_id, ...}``
* ``POST /v1/sessions/{id}/reset`` ``{seed?, complexity?, seq?}``; ``POST /v1/sessions/{id}/step`` ``{action, seq?}``
* ``GET /v1/sessions/{id}`` (state and info), ``GET /v1/sessions/{id}/observation``
* ``POST /v1/sessions/{id}/complexity`` ``{level, seq?}``; ``DELETE /v1/sessions/{id}``
* ``POST /v1/batch`` ``{calls: [{op: "step", session_id, action, seq?} | {op: "reset", session_id, seed?, ...}]}``:
  many calls on many sessions in one request; each result carries its own ``ok`` and, if refused, its error

Statuses: 400 malformed request, 401 missing/wrong token, 403 a non-loopback Host on a loopback server, 404
unknown session or env, 409 step after the episode ended (or out-of-order ``seq``), 413 oversized action or body,
415 a body that is not JSON, 422 bad complexity, 429 session limit, 503 shutting down. A raising or hung env is not
an HTTP error: its episode ends ``truncated`` with ``env_error`` and ``info["error"]``, and the next reset builds a
fresh env.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from gymverse.pycompat import timeout as deadline
from gymverse.server.config import ApiError, ServerConfig
from gymverse.server.episode_routes import EpisodeRoutes
from gymverse.server.index import add_index_routes
from gymverse.server.leases import LeaseManager
from gymverse.server.protocol import (
    BODY_KEY,
    ASGIApp,
    Receive,
    Scope,
    Send,
    complexity_field,
    dumps,
    kwargs_field,
    opt_int,
    opt_str,
    parse_object,
    req_str,
    send_json,
)

OPEN_PATHS = frozenset({"/health"})


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _host_name(header: bytes) -> str:
    host = header.decode("latin-1").strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[1 : host.find("]")]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def read_body(receive: Receive, limit: int, timeout: float) -> bytes:
    """The whole request body, chunked or not; 413 past `limit` bytes and 408 past `timeout` seconds, before more
    is buffered or waited for (a client trickling a body holds nothing for long)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with deadline(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ApiError(400, "bad_request", "the client disconnected before sending the whole body")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise ApiError(413, "body_too_large", f"request body exceeds {limit} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise ApiError(408, "body_timeout", f"the request body did not arrive within {timeout:g} s") from None


class Guard:
    """ASGI middleware, before any body is read: loopback Host check (DNS rebinding), 503 while draining, bearer
    token, JSON content type for bodies (so a web page cannot post to a local server without a CORS preflight),
    request-size limit; then the body is read once, capped in size and time (`read_body`), for every route."""

    def __init__(self, app: ASGIApp, manager: LeaseManager) -> None:
        self.app = app
        self.manager = manager
        token = manager.config.token
        self._expected = f"Bearer {token}".encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        error = self._refuse(scope)
        if error is not None:
            self.manager.metrics.http_errors[error.status] += 1
            await send_json(send, error.status, dumps(error.body()), error.headers)
            return
        try:
            body = await read_body(receive, self.manager.config.max_body_bytes, self.manager.config.body_timeout)
        except ApiError as err:
            self.manager.metrics.http_errors[err.status] += 1
            await send_json(send, err.status, dumps(err.body()), {"Connection": "close"})
            return
        scope[BODY_KEY] = body
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _refuse(self, scope: Scope) -> ApiError | None:
        headers = dict(scope["headers"])
        server = scope.get("server")
        if server and _is_loopback(str(server[0])):
            name = _host_name(headers.get(b"host", b""))
            if not (_is_loopback(name) or name == "localhost"):
                # A page whose name was re-pointed at 127.0.0.1 (DNS rebinding) must not drive a loopback server.
                return ApiError(403, "forbidden_host", f"Host {name!r} is not a loopback name; this server is local")
        if scope["path"] in OPEN_PATHS:
            return None
        if self.manager.draining:
            return ApiError(503, "shutting_down", "the server is shutting down; no new work is accepted")
        if self._expected is not None:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                why = "missing" if not given else "wrong"
                return ApiError(
                    401,
                    "unauthorized",
                    f"{why} bearer token (send 'Authorization: Bearer <token>')",
                    {"WWW-Authenticate": "Bearer"},
                )
        length = headers.get(b"content-length")
        if (length is not None and length.isdigit() and int(length) > 0) or b"transfer-encoding" in headers:
            ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if ctype != b"application/json":
                return ApiError(
                    415, "unsupported_media_type", f"send bodies as application/json, got {ctype.decode()!r}"
                )
        limit = self.manager.config.max_body_bytes
        if length is not None and length.isdigit() and int(length) > limit:
            return ApiError(413, "body_too_large", f"request body of {int(length)} bytes exceeds {limit} bytes")
        return None


def create_app(config: ServerConfig | None = None, manager: LeaseManager | None = None) -> Any:
    """The ASGI app (FastAPI wrapped in `Guard`); its `LeaseManager` is ``app.state.manager`` of the inner app."""

    config = config or ServerConfig()
    mgr = manager or LeaseManager(config)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        gc = asyncio.create_task(mgr.gc_loop(), name="gymverse-session-gc")
        try:
            yield
        finally:
            gc.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gc
            open_sessions = len(mgr.leases)
            await mgr.shutdown()
            logging.getLogger("uvicorn.error").info("gymverse serve: closed %d open session(s)", open_sessions)

    # No /docs or /redoc: their pages load assets from a CDN, dead offline; /openapi.json and GET / stay.
    app = FastAPI(title="GymVerse environment server", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.manager = mgr

    def ok(payload: Any, status: int = 200) -> Response:
        return Response(dumps(payload), status_code=status, media_type="application/json")

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, err: ApiError) -> Response:
        mgr.metrics.http_errors[err.status] += 1
        return Response(dumps(err.body()), err.status, headers=err.headers, media_type="application/json")

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, err: RequestValidationError) -> Response:
        return await api_error(_request, ApiError(400, "bad_request", f"malformed request: {err.errors()}"))

    @app.exception_handler(Exception)
    async def internal(_request: Request, err: Exception) -> Response:
        msg = f"internal error: {type(err).__name__}: {err}"
        return await api_error(_request, ApiError(500, "internal_error", msg))

    async def body(request: Request, *, required: bool = True) -> dict[str, Any]:
        return parse_object(await request.body(), required=required)

    @app.get("/health")
    async def health() -> Response:
        if mgr.draining:
            return ok({"status": "shutting_down", "active_sessions": len(mgr.leases)}, 503)
        return ok({"status": "ok", "active_sessions": len(mgr.leases)})

    @app.get("/metrics")
    async def metrics() -> Response:
        return ok(mgr.metrics.snapshot(len(mgr.leases)))

    @app.get("/v1/envs")
    async def list_envs() -> Response:
        return ok({"envs": mgr.describe_envs()})

    @app.post("/v1/sessions")
    async def create(request: Request) -> Response:
        data = await body(request)
        session, new = await mgr.create(
            req_str(data, "env_id"),
            kwargs_field(data),
            opt_int(data, "seed"),
            complexity_field(data),
            opt_str(data, "idempotency_key"),
        )
        doc = mgr.describe(session.env_id)
        return ok({"session_id": session.id, "env_id": session.env_id, "created": new, "env": doc}, 201 if new else 200)

    @app.get("/v1/sessions/{session_id}")
    async def state(session_id: str) -> Response:
        return ok(mgr.get(session_id).describe())

    @app.get("/v1/sessions/{session_id}/observation")
    async def observation(session_id: str) -> Response:
        session = mgr.get(session_id)
        return ok({"observation": session.observation, "ended": session.ended, "turn": session.turn})

    @app.post("/v1/sessions/{session_id}/complexity")
    async def set_complexity(session_id: str, request: Request) -> Response:
        data = await body(request)
        session = mgr.get(session_id)
        level = complexity_field(data, "level", required=True)
        assert level is not None
        return ok(await mgr.set_complexity(session, level, opt_int(data, "seq")))

    @app.delete("/v1/sessions/{session_id}")
    async def close(session_id: str) -> Response:
        await mgr.close(mgr.get(session_id))
        return ok({"session_id": session_id, "closed": True})

    from gymverse.server.agentgym import add_agentgym_routes

    add_agentgym_routes(app, mgr)
    add_index_routes(app, mgr)
    return Guard(EpisodeRoutes(app, mgr), mgr)
