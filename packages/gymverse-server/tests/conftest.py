"""Shared fixtures of the gymverse-server tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import gymverse.testing.vectest  # noqa: F401 - the vectest: fixture envs (only tests register them)
import pytest

# Children inherit an ignored SIGINT (a test run started in the background or under nohup), and tests that
# interrupt a child (`gymverse serve`) would then wait for nothing. A Python handler here is reset to the default
# in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def start_server() -> Iterator[Any]:
    """Start env servers (``start_server(port=0, **ServerConfig fields)``) on loopback; all stop after the test."""
    pytest.importorskip("fastapi")
    from gymverse.server import EnvServer, ServerConfig

    started: list[EnvServer] = []

    def start(port: int = 0, **config: Any) -> EnvServer:
        server = EnvServer(ServerConfig(**config), port=port).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
