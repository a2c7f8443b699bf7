"""A real OpenAI-compatible HTTP server on loopback whose replies are written by the test.

Replies come from a queue (`push`, or the `replies` argument) and, once it is empty, from an optional `handler`
called with each `RecordedRequest`. A reply is a string (the assistant text) or a `Reply`, which can also be an
HTTP error, a delay, or a connection dropped without an answer. Every request is recorded, and the server tracks
the peak number of requests in flight so tests can check client-side concurrency limits::

    with ScriptedLLMServer(["hello", Reply.error(500), "world"]) as server:
        client = OpenAIClient(server.base_url, model="scripted")
        ...
        assert server.requests[0].messages[-1]["content"] == "..."

`structured` says what the server does with a ``response_format`` JSON schema: ``"ignore"`` (the default: replies
as scripted), ``"vllm"`` (refuses what vLLM's grammar backend refuses, with vLLM's status and error body, and
forces the structure of every other reply, see `gymverse_synth.testing.structured`) or ``"refuse"`` (a server
without structured outputs: every ``json_schema`` request gets HTTP 400).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from gymverse_synth.testing import structured as so

Handler = Callable[["RecordedRequest"], "Reply | str"]
Structured = Literal["ignore", "vllm", "refuse"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: assistant `content`, or an HTTP error (`status` != 200), optionally after `delay` s."""

    content: str = ""
    status: int = 200
    delay: float = 0.0
    drop: bool = False
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None

    @classmethod
    def error(cls, status: int = 500, message: str = "scripted server error", delay: float = 0.0) -> Reply:
        """An HTTP error with an OpenAI-style error body."""
        body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
        return cls(status=status, body=body, delay=delay)

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> Reply:
        """HTTP 429, with a ``Retry-After`` header when `retry_after` is given."""
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        body = json.dumps({"error": {"message": "rate limit exceeded", "type": "rate_limit", "code": 429}})
        return cls(status=429, body=body, headers=headers)

    @classmethod
    def dropped(cls, delay: float = 0.0) -> Reply:
        """Close the connection without sending any response."""
        return cls(drop=True, delay=delay)


@dataclass
class RecordedRequest:
    """What a client sent: path, headers and the decoded JSON body."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat messages of a completions request (empty for other requests)."""
        return list(self.body.get("messages") or [])

    @property
    def last_user_message(self) -> str:
        """Content of the last user message, or ``""``."""
        users = [m["content"] for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""


def _words(text: str) -> int:
    return len(text.split())


class _RequestHandler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request stderr logging
        pass

    def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": owner.model, "object": "model"}]}))
        else:
            self._send(404, json.dumps({"error": {"message": f"no route GET {self.path}"}}))

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(400, json.dumps({"error": {"message": "request body is not JSON"}}))
            return
        request = owner._record(self.command, self.path, dict(self.headers.items()), body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, json.dumps({"error": {"message": f"no route POST {self.path}"}}))
            return
        owner._enter()
        try:
            refused = owner._refusal(body)
            if refused is not None:
                self._send(400, so.vllm_error_body(refused))
                return
            reply = owner._constrained(body, owner._next_reply(request))
            if reply.delay and owner._stopping.wait(reply.delay):
                return  # the server is shutting down: abandon the request
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.status != 200:
                self._send(reply.status, reply.body or "", reply.headers)
                return
            usage = reply.usage or {
                "prompt_tokens": sum(_words(m.get("content", "")) for m in request.messages),
                "completion_tokens": _words(reply.content),
            }
            usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            answer = {
                "id": f"scripted-{request.index}",
                "object": "chat.completion",
                "model": body.get("model") or owner.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                    }
                ],
                "usage": usage,
            }
            self._send(200, reply.body if reply.body is not None else json.dumps(answer), reply.headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired); nothing left to answer
        finally:
            owner._leave()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ScriptedLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # client-side aborts are part of the scripts; errors show up in the client's assertions


class ScriptedLLMServer:
    """OpenAI-compatible chat-completions server on ``127.0.0.1:<free port>``; see the module docstring."""

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        handler: Handler | None = None,
        *,
        model: str = "scripted",
        structured: Structured = "ignore",
    ) -> None:
        if structured not in ("ignore", "vllm", "refuse"):
            raise ValueError(f"structured must be 'ignore', 'vllm' or 'refuse', got {structured!r}")
        self.model = model
        self.structured = structured
        #: Replies whose structure the server forced to the requested schema (``structured="vllm"``).
        self.constrained = 0
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Reply | str] = deque(replies)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------------------------

    def push(self, *replies: Reply | str) -> None:
        """Append replies to the queue."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet served."""
        with self._lock:
            return len(self._queue)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        """Recorded chat-completions requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
        with self._lock:
            req = RecordedRequest(len(self.requests), method, path, headers, body if isinstance(body, dict) else {})
            self.requests.append(req)
            return req

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else None
        if item is None and self.handler is not None:
            try:
                item = self.handler(request)
            except Exception as err:  # surface the test's own bug in the client's error, not as a dropped socket
                return Reply.error(500, f"scripted handler raised {type(err).__name__}: {err}")
        if item is None:
            return Reply.error(500, f"scripted server: no reply scripted for request #{request.index}")
        return Reply(content=item) if isinstance(item, str) else item

    def _refusal(self, body: dict[str, Any]) -> str | None:
        if self.structured == "ignore" or "response_format" not in body:
            return None
        if self.structured == "refuse":
            rf = body["response_format"]
            if isinstance(rf, dict) and rf.get("type") == "json_schema":
                return "response_format of type 'json_schema' is not supported by this server"
            return None
        return so.refusal(body)

    def _constrained(self, body: dict[str, Any], reply: Reply) -> Reply:
        rf = body.get("response_format")
        if self.structured != "vllm" or reply.status != 200 or reply.drop or not isinstance(rf, dict):
            return reply
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None
        if not isinstance(schema, dict):
            return reply
        with self._lock:
            self.constrained += 1
        return dataclasses.replace(reply, content=so.constrain(reply.content, schema))

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    # -- lifecycle ---------------------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (raises if the server is not running)."""
        if self._server is None:
            raise RuntimeError("ScriptedLLMServer is not running; use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        """Bind a free loopback port and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _RequestHandler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="scripted-llm-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (delayed replies are abandoned)."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
