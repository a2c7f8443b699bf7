"""`gymverse serve` attacked: request forgery through remote+ ids, reused idempotency keys, oversized chunked bodies,
and clients that trickle headers or bodies."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")


class Listener:
    """A loopback TCP listener that records what connects to it (the target of a forged request)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.requests.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nsecret-intranet")
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    target = Listener()
    yield target
    target.close()


def test_remote_ids_are_not_served_unless_the_operator_lists_them(start_server: Any, listener: Listener) -> None:
    srv = start_server()
    forged = f"remote+http://127.0.0.1:{listener.port}/game:Mastermind"
    with httpx.Client(base_url=srv.url) as c:
        r = c.post("/v1/sessions", json={"env_id": forged, "seed": 0})
        assert r.status_code == 404 and r.json()["error"] == "unknown_env"
        assert "secret-intranet" not in r.text
        r = c.post("/agentgym/" + forged + "/create", json={})
        assert r.status_code in (404, 405)
        assert forged not in [e["id"] for e in c.get("/v1/envs").json()["envs"]]
    time.sleep(0.3)
    assert listener.requests == []  # the server never connected


def test_a_listed_remote_env_gets_neither_the_servers_token_nor_a_client_chosen_url(
    start_server: Any, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYMVERSE_TOKEN", "server-secret")
    proxied = f"remote+http://127.0.0.1:{listener.port}/game:Mastermind"
    srv = start_server(envs=(proxied, "vectest:Count"), token="server-secret")
    auth = {"Authorization": "Bearer server-secret"}
    with httpx.Client(base_url=srv.url, headers=auth, timeout=30) as c:
        for steer in ({"url": "http://169.254.169.254"}, {"token": "x"}, {"env_id": "game:Other"}):
            r = c.post("/v1/sessions", json={"env_id": proxied, "kwargs": steer})
            assert r.status_code == 400 and r.json()["error"] == "bad_kwargs", r.text
        sid = c.post("/v1/sessions", json={"env_id": proxied, "seed": 0}).json()["session_id"]
        c.post(f"/v1/sessions/{sid}/reset", json={})  # the fake target's answer is no env server's: an env error
    assert listener.requests, "the listed remote env was never contacted"
    for request in listener.requests:
        assert b"server-secret" not in request and b"authorization" not in request.lower()


def test_an_idempotency_key_is_bound_to_the_request_that_used_it(start_server: Any) -> None:
    srv = start_server()
    with httpx.Client(base_url=srv.url) as c:
        first = c.post("/v1/sessions", json={"env_id": "vectest:Count", "seed": 1, "idempotency_key": "k1"})
        assert first.status_code == 201
        again = c.post("/v1/sessions", json={"env_id": "vectest:Count", "seed": 1, "idempotency_key": "k1"})
        assert again.status_code == 200 and again.json()["session_id"] == first.json()["session_id"]
        for other in ({"env_id": "game:Mastermind", "seed": 1}, {"env_id": "vectest:Count", "seed": 2}):
            r = c.post("/v1/sessions", json={**other, "idempotency_key": "k1"})
            assert r.status_code == 422 and r.json()["error"] == "idempotency_key_reused", r.text
            assert r.json().get("session_id") is None


def _raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _response_or_close(s: socket.socket, within: float) -> tuple[bytes, float]:
    """What the server sends before closing (b"" if it only closed), and when."""
    t0 = time.monotonic()
    s.settimeout(within)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and b"Content-Length" in data:
                break
    except (TimeoutError, ConnectionResetError):
        pass
    return data, time.monotonic() - t0


def test_a_chunked_body_is_cut_at_the_size_limit_not_buffered_whole(start_server: Any) -> None:
    limit = 256 * 1024
    srv = start_server(max_body_bytes=limit)
    s = _raw(srv.port)
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
    sent = 0
    try:
        while sent < 200 * 1024 * 1024:  # the attack: 200 MB
            s.sendall(chunk)
            sent += 65536
    except OSError:  # the server answered and closed while we were still sending
        pass
    data, _ = _response_or_close(s, 5)
    s.close()
    assert sent < 64 * limit, f"the server read {sent} bytes of a body capped at {limit}"
    assert data.startswith(b"HTTP/1.1 413") and b"body_too_large" in data


def test_a_trickled_body_times_out(start_server: Any) -> None:
    srv = start_server(body_timeout=0.5)
    s = _raw(srv.port)
    head = b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    s.sendall(head + b"Content-Length: 200\r\n\r\n{")
    data, took = _response_or_close(s, 10)
    s.close()
    assert data.startswith(b"HTTP/1.1 408") and b"body_timeout" in data
    assert took < 5


def _trickle_and_expect_cut_off(port: int, url: str) -> None:
    """150 connections trickling header bytes are all closed within a few seconds; an honest client is served."""
    slow = [_raw(port) for _ in range(150)]
    for s in slow:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    t0 = time.monotonic()
    assert httpx.get(url, timeout=5).status_code == 200  # an honest client is not starved
    for _ in range(3):  # keep trickling: every byte arrives well within any per-read timeout
        time.sleep(0.4)
        for s in slow:
            with contextlib.suppress(OSError):
                s.sendall(b"X-Slow: 1\r\n")
    closed = 0
    for s in slow:
        data, _ = _response_or_close(s, max(0.1, 6 - (time.monotonic() - t0)))
        closed += data == b""
        s.close()
    assert closed == len(slow)
    assert time.monotonic() - t0 < 8


def test_serve_closes_connections_trickling_headers(start_server: Any) -> None:
    srv = start_server(header_timeout=1.0)
    _trickle_and_expect_cut_off(srv.port, f"{srv.url}/health")


def test_view_closes_connections_trickling_headers(tmp_path: Path) -> None:
    from gymverse.trajectory import write_jsonl
    from gymverse.viewer import TrajectoryIndex, ViewerServer
    from gymverse.viewer.sample import sample_trajectories

    write_jsonl(sample_trajectories(2, 5, seed=1), tmp_path / "run.jsonl")
    with ViewerServer(TrajectoryIndex([tmp_path]), header_timeout=1.0).start() as viewer:
        port = int(viewer.url.rsplit(":", 1)[1].strip("/"))
        _trickle_and_expect_cut_off(port, viewer.url + "api/meta")
