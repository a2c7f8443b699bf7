"""Running an ASGI app with uvicorn: in a background thread (tests, notebooks, benchmarks) or in the foreground."""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from gymverse.server.config import ServerConfig

if TYPE_CHECKING:  # typing.Self is Python 3.11+; only mypy reads it (annotations are strings here)
    from typing_extensions import Self

#: Idle keep-alive connections stay open this long (uvicorn's default, 5 s, is shorter than an LLM turn, so each
#: step after a long generation would open a new connection).
KEEP_ALIVE_S = 120


class PortInUse(OSError):
    """The address to serve on is taken (another server runs there)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on `host`:`port`, bound before anything is started or printed, so a taken port
    is reported first and alone (`PortInUse`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio only sets TCP_NODELAY on sockets whose proto is IPPROTO_TCP, and without it
    # Nagle's algorithm and delayed ACKs add ~40 ms to every small request on a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PortInUse(err.errno, f"{host}:{port} is already in use (another server runs there?)") from None
        raise
    return sock


def header_deadline_protocol(header_timeout: float) -> Any:
    """uvicorn's httptools protocol with a deadline on request headers: a connection that has not sent a request's
    whole head within `header_timeout` seconds of connecting (or of its first byte) is closed. uvicorn has no such
    limit, so clients trickling header bytes would each hold a connection for ever (slowloris)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class HeaderDeadlineProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(header_timeout, self.transport.close)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

    return HeaderDeadlineProtocol


class BackgroundServer:
    """Serves `app` with uvicorn in a daemon thread on `host`:`port` (0 picks a free port)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, http: Any = "auto") -> None:
        self.app = app
        self.host = host
        self.port = port
        self.http = http
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> Self:
        """Start serving; returns once the port accepts connections."""
        import uvicorn

        sock = bind(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=KEEP_ALIVE_S,
            http=self.http,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                sock.close()
                raise RuntimeError(f"server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (running the app's shutdown) and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EnvServer(BackgroundServer):
    """The environment server (`create_app`) in a background thread; ``manager`` is its `LeaseManager`."""

    def __init__(self, config: ServerConfig | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        from gymverse.server.app import create_app

        config = config or ServerConfig()
        app = create_app(config)
        super().__init__(app, host=host, port=port, http=header_deadline_protocol(config.header_timeout))
        self.manager = app.manager

    def drain(self) -> None:
        """Refuse new work with 503 (``/health`` reports ``shutting_down``) while staying up."""
        self.manager.draining = True


def serve(
    config: ServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Serve in the foreground until SIGINT/SIGTERM (then every session is closed); on `sock` when given (see
    `bind`), else on `host`:`port`."""
    import gc

    import uvicorn
    from gymverse.server.app import create_app

    sock = sock or bind(host, port)
    app = create_app(config)
    # Everything alive now (FastAPI, pydantic, numpy, the envs' modules) lives as long as the process: move it out
    # of the collector's sight. Otherwise every full collection walks it all, which measured as half the server's
    # CPU per step and most of its p99 latency (benchmarks/env_server.py).
    gc.collect()
    gc.freeze()
    settings = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_S,
        http=header_deadline_protocol(config.header_timeout),
    )
    uvicorn.Server(settings).run(sockets=[sock])
