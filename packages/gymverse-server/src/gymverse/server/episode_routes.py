"""The episode calls (``reset``, ``step``, ``batch``) as a lean ASGI layer in front of the FastAPI app.

They are nearly every request a trainer sends, so they skip FastAPI's per-request routing, dependency and response
machinery (about half the server's CPU per step in `benchmarks/env_server.py`); every other route is FastAPI's.
"""

from __future__ import annotations

from typing import Any

from gymverse.server.config import ApiError
from gymverse.server.leases import LeaseManager
from gymverse.server.protocol import BODY_KEY, complexity_field, dumps, opt_int, parse_object, req_str, send_json

_PREFIX = "/v1/sessions/"


async def reset(mgr: LeaseManager, session_id: str, raw: bytes) -> dict[str, Any]:
    """``POST /v1/sessions/{id}/reset {seed?, complexity?, seq?}``."""
    data = parse_object(raw, required=False)
    session = mgr.get(session_id)
    return await mgr.reset(session, opt_int(data, "seed"), complexity_field(data), opt_int(data, "seq"))


async def step(mgr: LeaseManager, session_id: str, raw: bytes) -> dict[str, Any]:
    """``POST /v1/sessions/{id}/step {action, seq?}``."""
    data = parse_object(raw)
    session = mgr.get(session_id)
    if "action" not in data:
        raise ApiError(400, "bad_request", "missing required field 'action'")
    return await mgr.step(session, mgr.check_action(data["action"]), opt_int(data, "seq"))


async def batch(mgr: LeaseManager, raw: bytes) -> dict[str, Any]:
    """``POST /v1/batch {calls: [{op: "step"|"reset", session_id, ...}]}``."""
    data = parse_object(raw)
    calls = data.get("calls")
    if not isinstance(calls, list):
        raise ApiError(400, "bad_request", "'calls' must be a list of {op, session_id, ...} objects")
    limit = mgr.config.max_batch
    if len(calls) > limit:
        raise ApiError(413, "batch_too_large", f"{len(calls)} calls exceed the batch limit of {limit}")
    items: list[tuple[str, str, Any, int | None]] = []
    for k, call in enumerate(calls):
        if not isinstance(call, dict):
            raise ApiError(400, "bad_request", f"calls[{k}] must be an object, got {type(call).__name__}")
        op = call.get("op", "step")
        if op == "step":
            arg: Any = call.get("action")
        elif op == "reset":
            arg = (opt_int(call, "seed"), complexity_field(call))
        else:
            raise ApiError(400, "bad_request", f"calls[{k}].op must be 'step' or 'reset', got {op!r}")
        items.append((op, req_str(call, "session_id"), arg, opt_int(call, "seq")))
    return {"results": await mgr.batch(items)}


class EpisodeRoutes:
    """ASGI layer: serves the episode calls itself and passes every other request to `app`."""

    def __init__(self, app: Any, manager: LeaseManager) -> None:
        self.app = app
        self.manager = manager

    def _route(self, path: str) -> tuple[str, str] | None:
        if path == "/v1/batch":
            return "batch", ""
        if path.startswith(_PREFIX):
            session_id, _, call = path[len(_PREFIX) :].partition("/")
            if session_id and call in ("step", "reset"):
                return call, session_id
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        route = self._route(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        mgr = self.manager
        call, session_id = route
        headers: dict[str, str] = {}
        try:
            raw: bytes = scope[BODY_KEY]  # read and capped by the Guard in front
            if call == "step":
                payload = await step(mgr, session_id, raw)
            elif call == "reset":
                payload = await reset(mgr, session_id, raw)
            else:
                payload = await batch(mgr, raw)
            status, body = 200, dumps(payload)
        except ApiError as err:
            mgr.metrics.http_errors[err.status] += 1
            status, body, headers = err.status, dumps(err.body()), err.headers
        except Exception as err:  # never a dead connection: the client gets the reason
            mgr.metrics.http_errors[500] += 1
            error = ApiError(500, "internal_error", f"internal error: {type(err).__name__}: {err}")
            status, body = 500, dumps(error.body())
        await send_json(send, status, body, headers)
