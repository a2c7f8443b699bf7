"""Wire format of the environment server: strict JSON body parsing with errors naming the field, and encoding."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np
from gymverse.complexity import MAX_LEVEL, MIN_LEVEL
from gymverse.server.config import ApiError

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The request body, read (and capped) once by `Guard` before any route runs.
BODY_KEY = "gymverse.body"


async def send_json(send: Send, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """Send one complete JSON response."""
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _jsonable(obj: Any) -> Any:
    """Fallback for values `json` cannot encode (env infos may hold numpy values, sets, bytes)."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return repr(obj)


def _dumps_json(obj: Any) -> bytes:
    return json.dumps(obj, default=_jsonable, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


try:  # orjson (a dependency; the fallback keeps a broken install serving) encodes and decodes several times faster
    import orjson

    _OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

    def dumps(obj: Any) -> bytes:
        """Compact UTF-8 JSON; values JSON cannot hold are converted (numpy) or shown as their repr."""
        try:
            return orjson.dumps(obj, default=_jsonable, option=_OPTIONS)
        except TypeError:  # e.g. lone surrogates or integers beyond 64 bits: the slower, more lenient encoder
            return _dumps_json(obj)

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - exercised only without the extra
    dumps = _dumps_json
    _loads = json.loads


def parse_object(raw: bytes, *, required: bool = True) -> dict[str, Any]:
    """The request body as a JSON object (an empty body is ``{}`` unless `required`)."""
    if not raw.strip():
        if required:
            raise ApiError(400, "bad_request", "the request body must be a JSON object, got an empty body")
        return {}
    try:
        data = _loads(raw)
    except (ValueError, RecursionError) as err:
        raise ApiError(400, "bad_request", f"the request body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def opt_int(data: dict[str, Any], name: str, *, minimum: int | None = 0) -> int | None:
    """Optional integer field ``name`` (>= `minimum`), else 400."""
    value = data.get(name)
    if value is None:
        return None
    if not _is_int(value) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ApiError(400, "bad_request", f"{name!r} must be an integer{bound} or null, got {value!r}")
    return int(value)


def opt_str(data: dict[str, Any], name: str, *, max_len: int = 256) -> str | None:
    """Optional non-empty string field ``name``."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ApiError(400, "bad_request", f"{name!r} must be a non-empty string of at most {max_len} characters")
    return value


def req_str(data: dict[str, Any], name: str, *, max_len: int = 256) -> str:
    """Required non-empty string field ``name``."""
    value = opt_str(data, name, max_len=max_len)
    if value is None:
        raise ApiError(400, "bad_request", f"missing required field {name!r}")
    return value


def complexity_field(data: dict[str, Any], name: str = "complexity", *, required: bool = False) -> int | None:
    """A complexity level in 1..10, else 422 naming the bad value."""
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(
                422, "bad_complexity", f"missing required field {name!r} (a level in {MIN_LEVEL}..{MAX_LEVEL})"
            )
        return None
    if not _is_int(value) or not MIN_LEVEL <= value <= MAX_LEVEL:
        raise ApiError(422, "bad_complexity", f"{name!r} must be an integer in {MIN_LEVEL}..{MAX_LEVEL}, got {value!r}")
    return int(value)


def kwargs_field(data: dict[str, Any]) -> dict[str, Any]:
    """The optional ``kwargs`` object passed to the env constructor."""
    value = data.get("kwargs")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ApiError(400, "bad_request", "'kwargs' must be a JSON object of constructor arguments")
    return value
