"""`import_object`: the one resolver of ``"package.module:attr"`` references (entry points, factories, jobs)."""

from __future__ import annotations

import importlib
from typing import Any


def import_object(ref: str) -> Any:
    """The object ``ref = "package.module:attr[.attr...]"`` names; a clear ImportError when it cannot be loaded."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError(f"{ref!r} must look like 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as err:  # the module's own error, not a bare "not found"
        raise ImportError(f"importing {module_name!r} failed: {type(err).__name__}: {err}") from err
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"{ref!r}: {type(obj).__name__} {module_name!r} has no attribute {part!r}") from None
    return obj


def split_spec(spec: str) -> tuple[str, str | None]:
    """Split ``"where[:Class]"`` into (where, class name or None); a drive-letter colon is not a separator."""
    where, sep, name = spec.rpartition(":")
    if sep and name.isidentifier() and where and not (len(where) == 1 and where.isalpha()):
        return where, name
    return spec, None
