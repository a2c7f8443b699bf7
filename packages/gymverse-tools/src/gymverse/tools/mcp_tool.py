"""MCP tool: calls tools of a Model Context Protocol server with the official `mcp` SDK.

The agent writes ``<mcp>{"name": "tool_name", "arguments": {...}}</mcp>``. One connection (stdio subprocess or
streamable HTTP) is opened on first use and reused for every call; it lives in a private event-loop thread so the
tool is usable from synchronous env code. Every call has a timeout. A connection that breaks (server crash,
transport error) is dropped and reopened on the next call, with exponential backoff between failed attempts.
Calls whose arguments cannot be encoded (lone surrogates, absurd nesting) are refused before they reach the
transport, where they would break the connection.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gymverse.pycompat import TIMEOUT_ERRORS
from gymverse.sandbox import MAX_JSON_DEPTH, json_depth
from gymverse.tools.base import Tool, ToolCallError, extract_tag, trim

#: Reconnect backoff: first retry after BACKOFF_BASE s, doubling per failed attempt, at most BACKOFF_MAX s.
BACKOFF_BASE, BACKOFF_MAX = 0.2, 10.0


class MCPTool(Tool):
    """`server` is a URL (streamable HTTP) or a command list (stdio, e.g. ``[sys.executable, "server.py"]``)."""

    name = "mcp"

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        timeout: float = 10.0,
        connect_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        max_output_chars: int = 2000,
    ) -> None:
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ValueError(f"MCP server must be an http(s) URL or a command list, got {server!r}")
        elif not server:
            raise ValueError("MCP server command list is empty")
        self.server = server
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.env = dict(env or {})
        self.max_output_chars = max_output_chars
        self.connections = 0  # how many times a connection was opened (reuse keeps this at 1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._lock = threading.Lock()
        self._failures = 0
        self._retry_at = 0.0

    # ------------------------------------------------------------------ connection
    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        target: Any = self.server
        if not isinstance(self.server, str):
            cmd = list(self.server)
            target = StdioServerParameters(command=cmd[0], args=cmd[1:], env=self.env or None)
        self._stop = stop = asyncio.Event()
        client: Any = None
        try:
            async with Client(target, read_timeout_seconds=self.timeout) as client:
                self._client = client
                self.connections += 1
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise
        finally:
            if self._client is client:  # a newer connection may already have replaced this one
                self._client = None

    def _ensure(self) -> None:
        with self._lock:
            if self._client is not None:
                return
            wait = self._retry_at - time.monotonic()
            if wait > 0:  # back off after failed attempts instead of hammering a broken server
                time.sleep(min(wait, self.connect_timeout))
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="gymverse-mcp")
                self._thread.start()
            loop = self._loop

            async def connect() -> None:
                ready: asyncio.Future[None] = loop.create_future()
                task = loop.create_task(self._hold(ready))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())  # silence "never retrieved"
                await ready

            try:
                asyncio.run_coroutine_threadsafe(connect(), loop).result(self.connect_timeout)
            except BaseException:
                self._failures += 1
                self._retry_at = time.monotonic() + min(BACKOFF_BASE * 2 ** (self._failures - 1), BACKOFF_MAX)
                raise
            self._failures, self._retry_at = 0, 0.0

    def _drop(self) -> None:
        """Forget a broken connection (its holder task ends); the next call opens a new one."""
        loop, stop = self._loop, self._stop
        self._client = None
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(stop.set)

    def _run(self, coro_fn: Any, timeout: float) -> Any:
        self._ensure()
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro_fn(self._client), self._loop).result(timeout)

    # ------------------------------------------------------------------ API
    def list_tools(self) -> list[str]:
        """Names of the server's tools."""

        async def go(client: Any) -> list[str]:
            return [t.name for t in (await client.list_tools()).tools]

        result: list[str] = self._run(go, self.timeout + 1)
        return result

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Call tool `name`; returns its text content, or an error message (never raises)."""

        async def go(client: Any) -> Any:
            return await client.call_tool(name, dict(arguments or {}), read_timeout_seconds=self.timeout)

        problem = _unsendable(arguments or {})
        if problem:
            return f"MCP error: arguments of {name!r} cannot be sent: {problem}"
        try:
            result = self._run(go, self.timeout + 2)
        except TIMEOUT_ERRORS:  # concurrent.futures.TimeoutError is not the builtin one on Python 3.10
            return f"MCP error: tool {name!r} did not answer within {self.timeout} s."
        except Exception as exc:
            if "timed out" in str(exc):
                return f"MCP error: tool {name!r} did not answer within {self.timeout} s."
            if _connection_broken(exc):
                self._drop()
                return f"MCP error: the connection to the server broke ({type(exc).__name__}: {exc}); reconnecting."
            return f"MCP error: calling {name!r} failed: {type(exc).__name__}: {exc}"
        parts = [getattr(c, "text", None) or json.dumps(c.model_dump(mode="json")) for c in result.content]
        text = "\n".join(parts)
        if result.is_error:
            return trim(f"MCP tool error: {text}", self.max_output_chars)
        return trim(text, self.max_output_chars) or "(no output)"

    def parse(self, action: str) -> str | None:
        """The JSON call inside ``<mcp>...</mcp>``, validated."""
        payload = extract_tag(action, "mcp")
        if payload is None:
            return None
        try:
            data = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"the <mcp> call is not valid JSON ({exc.msg})") from exc
        except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit integer, or nesting json cannot parse
            raise ToolCallError(f"the <mcp> call is not usable JSON ({type(exc).__name__}: {exc})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ToolCallError('the <mcp> call must be {"name": "<tool>", "arguments": {...}}')
        if not isinstance(data.get("arguments", {}), dict):
            raise ToolCallError('"arguments" of the <mcp> call must be a JSON object')
        problem = _unsendable(data)
        if problem:
            raise ToolCallError(f"the <mcp> call cannot be sent: {problem}")
        return payload

    def execute(self, payload: str) -> str:
        """Run a parsed call."""
        data = json.loads(payload)
        return self.call(data["name"], data.get("arguments", {}))

    def instruction(self) -> str:
        """How to call it."""
        return 'To call an MCP tool, write <mcp>{"name": "<tool>", "arguments": {...}}</mcp>.'

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        loop, stop = self._loop, self._stop
        if loop is None:
            return
        if stop is not None:
            loop.call_soon_threadsafe(stop.set)

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.wait(tasks, timeout=5) if tasks else None

        asyncio.run_coroutine_threadsafe(drain(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        loop.close()
        self._loop = self._thread = None


def _unsendable(value: Any) -> str | None:
    """Why `value` cannot travel over the MCP transport (too deep, or not encodable as UTF-8), or None."""
    if json_depth(value) > MAX_JSON_DEPTH:
        return f"nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "it contains a lone surrogate (invalid Unicode text)"
    except (TypeError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _connection_broken(exc: BaseException) -> bool:
    """Whether `exc` means the transport is gone (as opposed to one failed call)."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    broken = {"ClosedResourceError", "BrokenResourceError", "EndOfStream", "BrokenPipeError", "ConnectionError"}
    return bool(names & broken) or "connection closed" in str(exc).lower()
