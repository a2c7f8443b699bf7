"""What other packages register for the env host, read from entry points so that the sandbox names no higher package.

* ``gymverse.host_preload``: modules an env host imports before its first request (``name = "module"``), so a warm
  host (or the zygote hosts are forked from) has paid for them; e.g. the checker, GEM-file loading.
* ``gymverse.recordable_checks``: checker functions the host may run against an env and write down every env call
  of (``name = "module:function"`` taking ``(env, seed)``; `gymverse.sandbox._recording`). The trusted side reads
  the table and sends it with the host's ``init``: nothing in the sandbox reads package metadata.
"""

from __future__ import annotations

import functools
import importlib.metadata

from gymverse.sandbox.env_host import PRELOAD as BASE_PRELOAD

PRELOAD_GROUP = "gymverse.host_preload"
RECORDABLE_GROUP = "gymverse.recordable_checks"


def _entries(group: str) -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=group), key=lambda ep: ep.name)


@functools.cache
def host_preload() -> tuple[str, ...]:
    """`BASE_PRELOAD`, then the modules registered in ``gymverse.host_preload`` (by entry name)."""
    return (*BASE_PRELOAD, *(ep.value for ep in _entries(PRELOAD_GROUP) if ep.value not in BASE_PRELOAD))


@functools.cache
def recordable_checks() -> tuple[tuple[str, str], ...]:
    """``(name, "module:function")`` of every check registered in ``gymverse.recordable_checks``."""
    return tuple((ep.name, ep.value) for ep in _entries(RECORDABLE_GROUP))


__all__ = ["BASE_PRELOAD", "PRELOAD_GROUP", "RECORDABLE_GROUP", "host_preload", "recordable_checks"]
