"""A local Ray runtime for tests: one per test session, shared by every test that needs Ray."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def local_ray(num_cpus: int = 2) -> Iterator[Any]:
    """The `ray` module with a runtime up (no dashboard): started here unless one runs, and then stopped here."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
