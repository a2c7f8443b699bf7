"""What a person or a client finds at the server's root: ``GET /`` lists the served envs and the routes (HTML for a
browser, JSON otherwise) and ``GET /{env_id}`` describes one env and how to use it."""

from __future__ import annotations

import html
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from gymverse.server.config import ApiError
from gymverse.server.leases import LeaseManager
from gymverse.server.protocol import dumps

#: The routes as a client sees them, in the order a session uses them.
ROUTES = (
    ("GET", "/v1/envs", "the served envs with metadata and complexity tables"),
    ("POST", "/v1/sessions", "{env_id, kwargs?, seed?, complexity?, idempotency_key?} -> {session_id}"),
    ("POST", "/v1/sessions/{id}/reset", "{seed?, complexity?, seq?} -> first observation"),
    ("POST", "/v1/sessions/{id}/step", "{action, seq?} -> observation, reward, terminated, truncated, info"),
    ("POST", "/v1/batch", "{calls: [{op: step|reset, session_id, ...}]}: many sessions' calls in one request"),
    ("GET", "/v1/sessions/{id}", "state and info of a session"),
    ("DELETE", "/v1/sessions/{id}", "close a session"),
    ("POST", "/agentgym/{env_id}/create", "AgentGym's protocol: /create /reset /step /observation /close"),
    ("GET", "/health", "liveness (no token needed)"),
    ("GET", "/metrics", "sessions, steps/s, latency, errors"),
    ("GET", "/openapi.json", "the machine-readable API description"),
)


def _base(request: Request) -> str:
    host = request.headers.get("host") or "127.0.0.1"
    return f"{request.url.scheme}://{host}"


def index_payload(mgr: LeaseManager, base: str) -> dict[str, Any]:
    """The root document: served env ids, routes and the id a client builds for each env."""
    return {
        "service": "gymverse serve",
        "envs": mgr.served_envs(),
        "routes": [{"method": m, "path": p, "what": w} for m, p, w in ROUTES],
        "client": f"gymverse.make('remote+{base}/<env_id>')",
    }


def index_html(payload: dict[str, Any]) -> str:
    """The root document as a page (every value escaped)."""
    esc = html.escape
    envs = "".join(f'<li><a href="/{esc(e)}"><code>{esc(e)}</code></a></li>' for e in payload["envs"])
    routes = "".join(
        f"<tr><td>{esc(r['method'])}</td><td><code>{esc(r['path'])}</code></td><td>{esc(r['what'])}</td></tr>"
        for r in payload["routes"]
    )
    return (
        "<!doctype html><meta charset=utf-8><title>gymverse serve</title>"
        "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:60em}td{padding:2px 8px}</style>"
        f"<h1>gymverse serve</h1><p>From Python: <code>{esc(payload['client'])}</code></p>"
        f"<h2>{len(payload['envs'])} envs</h2><ul>{envs}</ul><h2>Routes</h2><table>{routes}</table>"
    )


def add_index_routes(app: Any, mgr: LeaseManager) -> None:
    """``GET /`` and ``GET /{env_id}`` (registered last, so every other route wins: with ``--agentgym``, ``GET /``
    is AgentGym's greeting)."""

    @app.get("/")
    async def root(request: Request) -> Response:
        payload = index_payload(mgr, _base(request))
        if "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(index_html(payload))
        return Response(dumps(payload), media_type="application/json")

    @app.get("/{env_id}")
    async def env_page(env_id: str, request: Request) -> Response:
        if env_id not in mgr.served_envs():
            raise ApiError(404, "not_found", f"no route or served env {env_id!r}; GET / lists both")
        doc = mgr.describe(env_id)
        use = {
            "python": f"gymverse.make('remote+{_base(request)}/{env_id}')",
            "http": 'POST /v1/sessions {"env_id": "' + env_id + '"}, then .../reset and .../step',
        }
        return Response(dumps({"env": doc, "use": use}), media_type="application/json")
