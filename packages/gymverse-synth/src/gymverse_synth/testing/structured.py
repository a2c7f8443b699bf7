"""Structured output the way vLLM serves it, for `ScriptedLLMServer`: refuse what its grammar backend cannot compile,
force the structure of what it can.

vLLM (xgrammar backend, `vllm/v1/structured_output/backend_xgrammar.py`) checks a ``response_format`` schema before
decoding and answers HTTP 400 with its `ErrorResponse` body
``{"error": {"message": ..., "type": "BadRequestError", "param": null, "code": 400}}`` when the schema uses a
feature it cannot honour (`unsupported_features` mirrors those checks). A schema it accepts is compiled into a
grammar, so the reply always matches it: here `constrain` turns a scripted reply into such a reply, keeping the
values the script wrote where the schema allows them and writing fillers where it forces structure (a missing
required key, a value of the wrong type), as a model decoding under a grammar would.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: vLLM's message for a schema with a feature xgrammar does not support.
XGRAMMAR_UNSUPPORTED = "The provided JSON schema contains features not supported by xgrammar."
#: String formats xgrammar compiles (vLLM's STRING_SUPPORTED_FORMATS).
STRING_FORMATS = frozenset(
    {"email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri"}
)
_FILLERS = ("Env", "x", "value", "a")


def vllm_error_body(message: str, status: int = 400) -> str:
    """vLLM's `ErrorResponse` JSON for a refused request."""
    kind = "BadRequestError" if status == 400 else "UnprocessableEntityError"
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}})


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    return {t} if isinstance(t, str) else {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()


def unsupported_features(schema: Any, path: str = "$") -> list[str]:
    """Where `schema` uses a feature vLLM's xgrammar backend refuses (empty: it would be served)."""
    if not isinstance(schema, dict):
        return []
    found: list[str] = []
    types = _types(schema)
    if types & {"integer", "number"} and "multipleOf" in schema:
        found.append(f"{path}: multipleOf")
    if "array" in types:
        found += [f"{path}: {k}" for k in ("uniqueItems", "contains", "minContains", "maxContains") if k in schema]
    if "string" in types:
        if "format" in schema and schema["format"] not in STRING_FORMATS:
            found.append(f"{path}: format {schema['format']!r}")
        if ("pattern" in schema or "format" in schema) and ("minLength" in schema or "maxLength" in schema):
            found.append(f"{path}: pattern/format with minLength/maxLength")
    if "object" in types and "propertyNames" in schema and "properties" in schema:
        found.append(f"{path}: propertyNames with properties")
    for key, value in schema.items():
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            found += unsupported_features(item, f"{path}.{key}" + (f"[{i}]" if isinstance(value, list) else ""))
    return found


def refusal(body: dict[str, Any]) -> str | None:
    """vLLM's error message for the ``response_format`` of a request body, or None when it would be served."""
    rf = body.get("response_format")
    if rf is None:
        return None
    if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
        return f"response_format: type must be 'text', 'json_object' or 'json_schema', got {rf!r:.80}"
    if rf["type"] != "json_schema":
        return None
    inner = rf.get("json_schema")
    if not isinstance(inner, dict) or not isinstance(inner.get("schema"), dict):
        return "response_format: json_schema.schema must be a JSON schema object"
    return XGRAMMAR_UNSUPPORTED if unsupported_features(inner["schema"]) else None


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return dict(root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {}))
    return schema


def _string(value: Any, schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return value if value in schema["enum"] else str(schema["enum"][0])
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not re.search(pattern, text):
        text = next((f for f in _FILLERS if re.search(pattern, f)), "x")
    return text.ljust(int(schema.get("minLength", 0)), "x")


def _value(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    schema = _resolve(schema, root)
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        for option in options:
            if _value(value, option, root) == value:
                return value
        return _value(value, options[0], root)
    types = _types(schema) or ({"string"} if "enum" in schema else {"object"})
    if "object" in types:
        return _object(value if isinstance(value, dict) else {}, schema, root)
    if "array" in types:
        items = list(value) if isinstance(value, list) else []
        items = items[: schema.get("maxItems", len(items))]
        items += [None] * max(0, int(schema.get("minItems", 0)) - len(items))
        return [_value(v, schema.get("items", {}), root) for v in items]
    if types & {"integer", "number"}:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value) if types == {"integer"} else value
        return 0
    if "boolean" in types:
        return value if isinstance(value, bool) else False
    return _string(value, schema)


def _object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    out = {k: _value(value.get(k), sub, root) for k, sub in props.items() if k in value or k in required}
    if schema.get("additionalProperties", True) is not False:  # a grammar allows what the schema allows
        out.update({k: v for k, v in value.items() if k not in props})
    return out


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text` (prose and fences around it ignored), or ``{}``."""
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            obj = json.JSONDecoder(strict=False).raw_decode(text, start)[0]
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return {}


def constrain(text: str, schema: dict[str, Any]) -> str:
    """The reply a server decoding under `schema` gives where the script wrote `text`: JSON matching the schema."""
    return json.dumps(_value(first_json_object(text), schema, schema))


__all__ = [
    "XGRAMMAR_UNSUPPORTED",
    "constrain",
    "first_json_object",
    "refusal",
    "unsupported_features",
    "vllm_error_body",
]
