"""Shared fixtures of the gymverse-core tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import gymverse.testing.vectest  # noqa: F401 - the vectest: fixture envs (only tests register them)
import pytest
from gymverse.testing.ray_runtime import local_ray
from hypothesis import settings

# No per-example time limit: on a loaded 2-core CI machine a 0.3 ms example can take 250 ms, and timings are never
# a pass/fail criterion here.
settings.register_profile("gymverse", deadline=None)
settings.load_profile("gymverse")

# Children inherit an ignored SIGINT (a test run started in the background or under nohup), and tests that
# interrupt a child (the sandbox host, `serve`, `view`) would then wait for nothing. A Python handler here is reset
# to the default in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Under `uv run`, Ray would start every worker through `uv run` as well (seconds per actor, and it packages the
# work tree); the venv already is the right environment. Ray reads this when it is first imported.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray runtime (2 CPUs, no dashboard) shared by every test of the session that needs Ray."""
    pytest.importorskip("ray")
    with local_ray() as ray:
        yield ray
