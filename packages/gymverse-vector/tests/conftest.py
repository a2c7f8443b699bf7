"""Shared fixtures of the gymverse-vector tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import gymverse.testing.vectest  # noqa: F401 - the vectest: fixture envs (only tests register them)
import pytest
from gymverse.testing.ray_runtime import local_ray

# Under `uv run`, Ray would start every worker through `uv run` as well (seconds per actor, and it packages the
# work tree); the venv already is the right environment. Ray reads this when it is first imported.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray runtime (2 CPUs, no dashboard) shared by every test of the session that needs Ray."""
    pytest.importorskip("ray")
    with local_ray() as ray:
        yield ray
