"""The exceptions a hosted env's caller sees: the host failed (`EnvHostError`, `EnvHostTimeout`) or the env raised
(`EnvCallError` subclasses named after the remote type, built by `remote_error`)."""

from __future__ import annotations

import builtins
import sys
import types
from typing import Any

from gymverse import deadline as _deadline

#: Remote exception names one host may add to its own table of classes (`remote_error`).
MAX_NAMES = 256


class EnvHostError(Exception):
    """The env host cannot answer: it exited, broke the protocol, exceeded its limits, or was given up on."""


class EnvHostTimeout(_deadline.CallTimeout):
    """A hosted env did not answer a call in time; its host was killed."""


class EnvCallError(Exception):
    """The hosted env raised; the concrete class is named after the remote exception type."""

    remote_type: str = "Exception"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: Classes for the builtin exception names: a fixed set, so sharing them across hosts holds no env's state.
_BUILTIN_ERRORS: dict[str, type[EnvCallError]] = {}


def _error_class(name: str) -> type[EnvCallError]:
    """A class named `name` deriving from `EnvCallError` and from the builtin of that name, or from its nearest base
    that can be raised with one message (UnicodeDecodeError needs five arguments: ValueError stands in for it)."""
    builtin = getattr(builtins, name, None)
    bases = builtin.__mro__ if isinstance(builtin, type) and issubclass(builtin, Exception) else ()
    for base in bases:
        if base is Exception:
            break
        try:
            cls = types.new_class(name, (EnvCallError, base))
            cls("probe")
        except TypeError:  # its own C layout (OSError) or constructor (UnicodeDecodeError, ExceptionGroup)
            continue
        cls.__module__ = "gymverse.sandbox.hosted.remote"
        return cls
    cls = types.new_class(name, (EnvCallError,))
    cls.__module__ = "gymverse.sandbox.hosted.remote"
    return cls


def remote_error(
    type_name: Any, message: Any, traceback: Any = None, table: dict[str, type[EnvCallError]] | None = None
) -> EnvCallError:
    """The exception to raise for an env's remote exception (class named after it, builtin base kept).

    Builtin names always map to their class; other names are cached in `table`, the calling host's own (at most
    `MAX_NAMES`), so an env that raises thousands of made-up types changes nothing for another env.
    """
    name = str(type_name)[:100] if isinstance(type_name, str) and type_name.isidentifier() else "EnvCallError"
    builtin = isinstance(getattr(builtins, name, None), type)
    cache = _BUILTIN_ERRORS if builtin else table
    cls = cache.get(name) if cache is not None else None
    if cls is None:
        cls = _error_class(name)
        if cache is not None and (builtin or len(cache) < MAX_NAMES):
            cache[name] = cls
    err = cls(str(message)[:2000])
    err.remote_type = name
    if isinstance(traceback, str) and traceback:
        note = "in the env host:\n" + traceback[-3000:]
        if sys.version_info >= (3, 11):
            err.add_note(note)
        else:  # Python 3.10: the same __notes__ list (its traceback does not print it)
            err.__notes__ = [*getattr(err, "__notes__", []), note]  # type: ignore[attr-defined,unused-ignore]
    return err


__all__ = ["MAX_NAMES", "EnvCallError", "EnvHostError", "EnvHostTimeout", "remote_error"]
