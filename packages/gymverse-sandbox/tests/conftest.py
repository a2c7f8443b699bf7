"""Shared fixtures of the gymverse-sandbox tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest

# Children inherit an ignored SIGINT (a test run started in the background or under nohup), and tests that
# interrupt a child (the sandbox host) would then wait for nothing. A Python handler here is reset to the default
# in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)


class _Limits(TypedDict):
    """The `SandboxLimits` fields `LAUNCHER_LIMITS` sets (the module is imported only inside the fixture)."""

    timeout: float
    memory_mb: int
    max_processes: int


#: Limits of the jobs run by `every_launcher`.
LAUNCHER_LIMITS: _Limits = {"timeout": 20, "memory_mb": 512, "max_processes": 16}


@pytest.fixture(scope="module", params=["bwrap", "ctypes", "pool"])
def every_launcher(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A `Sandbox` for each fresh-job launcher (bubblewrap skipped where unusable) and a one-worker `SandboxPool`."""
    from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, isolation_support

    limits = SandboxLimits(**LAUNCHER_LIMITS)
    if request.param == "bwrap" and not isolation_support()["bwrap"]:
        pytest.skip("bubblewrap is not installed or not usable here")
    if request.param == "pool":
        with SandboxPool(1, limits) as pool:
            yield pool
    else:
        yield Sandbox(limits, backend=request.param)
