"""Python values <-> plain JSON for the env host protocol, without pickle.

What an env returns (observations, infos, params, metadata) crosses from the sandbox to the trusted process as JSON
with a few tags, so the trusted side gets back the types its checks look at: tuples stay tuples, NumPy scalars and
numeric arrays stay NumPy, sets stay sets, and any other object becomes a `RemoteObject` (its type name plus its
attributes or repr) that compares by value. A tag is a one-key object whose key starts with NUL, a character no
honest dict key starts with (dicts that have such keys, or non-str keys, are sent as tagged pair lists).

`decode` runs on untrusted input: every malformed tag raises `CodecError` (a ValueError), never anything else, and
nothing in it can execute code (no pickle, no object construction beyond NumPy's numeric types).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

TUPLE, SET, PAIRS, SCALAR, ARRAY, OBJECT = "\0t", "\0s", "\0d", "\0n", "\0a", "\0o"
#: Deeper values are sent as their type name only (cycles, absurd nesting); the wire's own cap is 200 levels.
MAX_DEPTH = 48
#: NumPy kinds that travel as NumPy values: bool, signed, unsigned, float.
NUMERIC_KINDS = frozenset("biuf")
_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


class CodecError(ValueError):
    """A tagged value from the env host is malformed."""


class RemoteObject:
    """An object of a type that has no JSON form, as the env host described it: type name and content."""

    __slots__ = ("content", "type_name")

    def __init__(self, type_name: str, content: Any) -> None:
        self.type_name = type_name
        self.content = content

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteObject) and (self.type_name, self.content) == (other.type_name, other.content)

    def __hash__(self) -> int:
        return hash((self.type_name, repr(self.content)))

    def __repr__(self) -> str:
        return f"<{self.type_name} {self.content!r}>"


#: Exact types `encode` returns as they are (subclasses, e.g. NumPy's float64, take the long way).
_PLAIN = frozenset((str, int, float, bool, type(None)))


def encode(value: Any, depth: int = 0) -> Any:
    """`value` as tagged JSON (host side)."""
    if type(value) in _PLAIN:  # the common case first: most of an answer is strings and numbers
        return value
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind in NUMERIC_KINDS:
            return {SCALAR: [value.dtype.str, value.item()]}
        return {OBJECT: [type(value).__qualname__, repr(value)]}
    if isinstance(value, int | float):
        return int(value) if isinstance(value, int) else float(value)
    if depth > MAX_DEPTH:
        return {OBJECT: [type(value).__qualname__, "<too deep>"]}
    deeper = depth + 1
    if isinstance(value, list):
        return [v if type(v) in _PLAIN else encode(v, deeper) for v in value]
    if isinstance(value, tuple):
        return {TUPLE: [v if type(v) in _PLAIN else encode(v, deeper) for v in value]}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and not k.startswith("\0") for k in value):
            return {k: v if type(v) in _PLAIN else encode(v, deeper) for k, v in value.items()}
        return {PAIRS: [[encode(k, deeper), encode(v, deeper)] for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        return {SET: [encode(v, depth + 1) for v in sorted(value, key=repr)]}
    if isinstance(value, np.ndarray) and value.dtype.kind in NUMERIC_KINDS:
        return {ARRAY: [value.dtype.str, list(value.shape), value.tolist()]}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {OBJECT: [type(value).__qualname__, encode(dict(vars(value)), depth + 1)]}
    return {OBJECT: [type(value).__qualname__, _ADDR.sub("", repr(value))[:2000]]}


def decode(obj: Any) -> Any:
    """The Python value of tagged JSON `obj` (trusted side; `obj` is already depth- and size-capped)."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if isinstance(obj, dict):
        if len(obj) == 1:
            ((key, body),) = obj.items()
            if key.startswith("\0"):
                return _tagged(key, body)
        return {k: decode(v) for k, v in obj.items()}
    return obj


def _numeric_dtype(text: Any) -> np.dtype[Any]:
    if not isinstance(text, str) or len(text) > 8:
        raise CodecError(f"bad dtype {text!r}")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError) as err:
        raise CodecError(f"bad dtype {text!r}") from err
    if dtype.kind not in NUMERIC_KINDS:
        raise CodecError(f"dtype {text!r} is not numeric")
    return dtype


def _tagged(tag: str, body: Any) -> Any:
    if tag in (TUPLE, SET) and isinstance(body, list):
        items = [decode(v) for v in body]
        if tag == TUPLE:
            return tuple(items)
        try:
            return set(items)
        except TypeError as err:
            raise CodecError("unhashable set member") from err
    if tag == PAIRS and isinstance(body, list):
        out: dict[Any, Any] = {}
        for pair in body:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise CodecError("bad key/value pair")
            key = decode(pair[0])
            try:
                out[key] = decode(pair[1])
            except TypeError as err:
                raise CodecError("unhashable dict key") from err
        return out
    if tag == SCALAR and isinstance(body, list) and len(body) == 2 and isinstance(body[1], bool | int | float):
        try:
            return _numeric_dtype(body[0]).type(body[1])
        except (OverflowError, ValueError, TypeError) as err:
            raise CodecError(f"bad NumPy scalar {body[1]!r}") from err
    if tag == ARRAY and isinstance(body, list) and len(body) == 3 and isinstance(body[1], list):
        dtype = _numeric_dtype(body[0])
        try:
            array = np.array(body[2], dtype=dtype)
        except (OverflowError, ValueError, TypeError) as err:
            raise CodecError("bad NumPy array") from err
        if list(array.shape) != body[1]:
            raise CodecError(f"NumPy array shape {list(array.shape)} differs from the declared {body[1]}")
        return array
    if tag == OBJECT and isinstance(body, list) and len(body) == 2 and isinstance(body[0], str):
        return RemoteObject(body[0][:200], decode(body[1]))
    raise CodecError(f"malformed tagged value {tag!r}")


__all__ = ["CodecError", "RemoteObject", "decode", "encode"]
