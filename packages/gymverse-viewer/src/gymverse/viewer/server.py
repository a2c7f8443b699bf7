"""`ViewerServer`: the viewer page and its JSON API over a `TrajectoryIndex`, on the standard library's HTTP server.

Routes: ``/`` the page, ``/api/meta``, ``/api/episodes?env=&cmin=&cmax=&success=&error=&format_error=&q=&sort=
&desc=&offset=&limit=&summary=`` (one page of rows plus the summary panels), ``/api/episode/<id>``. Bad
parameters answer 400 with ``{"error": ...}``; a client that hangs up mid-answer is ignored, one that does not send
its request head within `HEADER_TIMEOUT` is cut off. Bound to a loopback
address, the server answers only requests addressed to a loopback name, so a web page that rebinds its own domain
to 127.0.0.1 cannot read the trajectories.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gymverse.viewer.detail import episode_view
from gymverse.viewer.index import TrajectoryIndex
from gymverse.viewer.page import render_page, to_json
from gymverse.viewer.query import parse_query

#: Seconds a connection has to send a request's line and headers (also how long an idle keep-alive connection
#: stays open): a client trickling header bytes gives its thread back after this long.
HEADER_TIMEOUT = 30.0
#: Connections served at once (a thread each); more are closed on arrival. A browser opens about six.
MAX_CONNECTIONS = 256


class _Deadlines:
    """Shuts down connections whose request head is late; one thread watches them all."""

    def __init__(self) -> None:
        self._due: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gymverse-view-deadlines", daemon=True)
        self._thread.start()

    def arm(self, conn: socket.socket, seconds: float) -> None:
        """Shut `conn` down unless `disarm` is called within `seconds`."""
        with self._lock:
            self._due[conn] = time.monotonic() + seconds

    def disarm(self, conn: socket.socket) -> None:
        """The head of `conn`'s request has arrived in time."""
        with self._lock:
            self._due.pop(conn, None)

    def close(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            now = time.monotonic()
            with self._lock:
                late = [c for c, due in self._due.items() if due <= now]
                for conn in late:
                    del self._due[conn]
            for conn in late:  # the handler's blocked read returns empty and its thread ends
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server_version = "gymverse-view"
    protocol_version = "HTTP/1.1"  # keep-alive: the page's requests reuse one connection
    # headers and body go out in two writes; with Nagle on, the body waits for the client's delayed ACK (~40 ms)
    disable_nagle_algorithm = True
    timeout = HEADER_TIMEOUT  # per read; `_Deadlines` bounds the whole head
    server: _Server
    index: TrajectoryIndex
    page: bytes
    lock: threading.Lock
    allowed_hosts: frozenset[str] | None

    def handle_one_request(self) -> None:
        deadlines = self.server.deadlines
        deadlines.arm(self.connection, self.server.header_timeout)
        try:
            super().handle_one_request()
        finally:
            deadlines.disarm(self.connection)

    def parse_request(self) -> bool:
        self.server.deadlines.disarm(self.connection)  # the line and headers are in
        return super().parse_request()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if self.allowed_hosts is not None and _hostname(self.headers.get("Host", "")) not in self.allowed_hosts:
            self._json(HTTPStatus.FORBIDDEN, {"error": "this viewer only answers requests addressed to localhost"})
            return
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        try:
            if url.path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, self.page, "text/html; charset=utf-8")
            elif url.path == "/api/meta":
                self._json(HTTPStatus.OK, self.index.meta())
            elif url.path == "/api/episodes":
                query, offset, limit = parse_query(params)
                with self.lock:  # the index's mask/order caches are not thread-safe; queries take milliseconds
                    body = self.index.query(query, offset, limit, with_summary=params.get("summary", "1") != "0")
                self._json(HTTPStatus.OK, body)
            elif url.path.startswith("/api/episode/"):
                raw = url.path.rsplit("/", 1)[1]
                if not raw.isdigit():
                    raise ValueError(f"episode id must be a non-negative integer, got {raw!r}")
                i = int(raw)
                self._json(HTTPStatus.OK, episode_view(self.index.record(i), self.index.row(i)))
            elif url.path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except IndexError as err:
            self._json(HTTPStatus.NOT_FOUND, {"error": str(err)})
        except ValueError as err:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(err)})
        except Exception as err:  # one bad request must not take the viewer down
            self.log_error("%s failed: %s: %s", self.path, type(err).__name__, err)
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(err).__name__}: {err}"})

    def _json(self, status: HTTPStatus, obj: Any) -> None:
        self._send(status, to_json(obj).encode("utf-8"), "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the terminal; errors go through log_error

    def log_error(self, format: str, *args: Any) -> None:
        print(f"gymverse view: {format % args}", file=sys.stderr)


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def _hostname(host_header: str) -> str:
    """``Host`` header without its port (``[::1]:80`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # closing must not wait for browsers that keep connections open

    def __init__(self, address: tuple[str, int], handler: type[_Handler], header_timeout: float) -> None:
        self.header_timeout = header_timeout
        self.deadlines = _Deadlines()  # before binding: a failed bind calls server_close
        self._active = 0
        self._count = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            full = self._active >= MAX_CONNECTIONS
            self._active += not full
        if full:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self._active -= 1

    def server_close(self) -> None:
        super().server_close()
        self.deadlines.close()


class ViewerServer:
    """An HTTP server for `index` on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self, index: TrajectoryIndex, host: str = "127.0.0.1", port: int = 0, header_timeout: float = HEADER_TIMEOUT
    ) -> None:
        loopback = host in LOOPBACK_NAMES or host.startswith("127.")
        attrs = {
            "index": index,
            "page": render_page().encode("utf-8"),
            "lock": threading.Lock(),
            "allowed_hosts": LOOPBACK_NAMES | {host} if loopback else None,
        }
        handler = type("ViewerHandler", (_Handler,), attrs)
        self.httpd = _Server((host, port), handler, header_timeout)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page's address."""
        host, port = self.httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/"

    def serve_forever(self) -> None:
        """Serve until `close` (or Ctrl-C in the calling thread)."""
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> ViewerServer:
        """Serve from a background thread (tests, notebooks); returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="gymverse-view", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
            self._thread = None
        self.httpd.server_close()

    def __enter__(self) -> ViewerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ViewerServer"]
