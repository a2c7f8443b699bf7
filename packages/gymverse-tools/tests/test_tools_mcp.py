"""MCPTool against real MCP servers written here: one over stdio (subprocess), one over streamable HTTP."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from gymverse.tools import MCPTool, ToolCallError
from gymverse.tools.retrieval_server import RetrievalServer

SERVER_SOURCE = textwrap.dedent(
    """
    import time

    from mcp.server.mcpserver import MCPServer

    server = MCPServer("gymverse-test", log_level="CRITICAL")
    calls = {"n": 0}


    @server.tool()
    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b


    @server.tool()
    def counter() -> int:
        \"\"\"How many times this tool was called in this server process.\"\"\"
        calls["n"] += 1
        return calls["n"]


    @server.tool()
    def slow(seconds: float) -> str:
        \"\"\"Sleep, then answer.\"\"\"
        time.sleep(seconds)
        return "done"


    @server.tool()
    def pid() -> int:
        \"\"\"The server's process id.\"\"\"
        import os
        return os.getpid()


    @server.tool()
    def fail() -> str:
        \"\"\"Always raises.\"\"\"
        raise RuntimeError("tool blew up")


    if __name__ == "__main__":
        server.run()
    """
)


@pytest.fixture(scope="module")
def stdio_tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPTool]:
    path: Path = tmp_path_factory.mktemp("mcp") / "server.py"
    path.write_text(SERVER_SOURCE)
    tool = MCPTool([sys.executable, str(path)], timeout=1.0)
    yield tool
    tool.close()


def test_stdio_lists_and_calls_tools(stdio_tool: MCPTool) -> None:
    assert sorted(stdio_tool.list_tools()) == ["add", "counter", "fail", "pid", "slow"]
    assert stdio_tool.call("add", {"a": 2, "b": 40}) == "42"
    payload = stdio_tool.parse('<mcp>{"name": "add", "arguments": {"a": 1, "b": 2}}</mcp>')
    assert payload is not None
    assert stdio_tool.execute(payload) == "3"


def test_stdio_connection_is_reused(stdio_tool: MCPTool) -> None:
    # The counter lives in the server process: a reconnect would start a new process and restart it at 1.
    first = int(stdio_tool.call("counter"))
    assert [int(stdio_tool.call("counter")) for _ in range(3)] == [first + 1, first + 2, first + 3]
    assert stdio_tool.connections == 1


def test_timeout_is_enforced_and_the_connection_survives(stdio_tool: MCPTool) -> None:
    assert stdio_tool.call("slow", {"seconds": 5}) == "MCP error: tool 'slow' did not answer within 1.0 s."
    assert stdio_tool.call("add", {"a": 1, "b": 1}) == "2"


def test_tool_errors_are_observations(stdio_tool: MCPTool) -> None:
    assert stdio_tool.call("fail").startswith("MCP tool error: Error executing tool fail")
    assert stdio_tool.call("no_such_tool").startswith("MCP tool error:")
    assert stdio_tool.call("add", {"a": "x"}).startswith("MCP tool error:")


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("<mcp>{not json}</mcp>", "not valid JSON"),
        ('<mcp>{"arguments": {}}</mcp>', '"name"'),
        ('<mcp>{"name": "add", "arguments": [1, 2]}</mcp>', "JSON object"),
        ('<mcp>{"name": "add"', "never closed"),
    ],
)
def test_malformed_calls(action: str, message: str) -> None:
    tool = MCPTool("http://127.0.0.1:9/mcp")
    with pytest.raises(ToolCallError, match=message):
        tool.parse(action)
    assert tool.parse(r"\boxed{1}") is None


def test_bad_server_spec() -> None:
    with pytest.raises(ValueError, match="URL or a command list"):
        MCPTool("server.py")
    with pytest.raises(ValueError, match="empty"):
        MCPTool([])


def test_streamable_http(tmp_path: Path) -> None:
    namespace: dict[str, object] = {}
    exec(compile(SERVER_SOURCE, "mcp_server", "exec"), namespace)
    app = namespace["server"].streamable_http_app()  # type: ignore[attr-defined]
    with RetrievalServer(app=app) as http:
        tool = MCPTool(f"{http.url}/mcp", timeout=1.0)
        try:
            assert tool.call("add", {"a": 20, "b": 22}) == "42"
            first = int(tool.call("counter"))
            assert int(tool.call("counter")) == first + 1
            assert tool.call("slow", {"seconds": 1.5}) == "MCP error: tool 'slow' did not answer within 1.0 s."
            assert tool.call("add", {"a": 1, "b": 2}) == "3"
            assert tool.connections == 1
        finally:
            tool.close()


# Issue 19: a hostile argument must not break the connection for good; a broken one is reopened with backoff.
@pytest.fixture
def server(tmp_path: Path) -> Iterator[MCPTool]:
    path = tmp_path / "server.py"
    path.write_text(SERVER_SOURCE)
    tool = MCPTool([sys.executable, str(path)], timeout=5.0)
    yield tool
    tool.close()


def test_lone_surrogate_does_not_kill_the_connection(server: MCPTool) -> None:
    assert server.call("add", {"a": 1, "b": 2}) == "3"
    reply = server.call("add", {"a": "\udcff", "b": 2})  # used to kill the stdio transport for good
    assert "lone surrogate" in reply
    assert server.call("add", {"a": 2, "b": 2}) == "4"
    assert server.connections == 1


def test_crashed_server_is_reconnected(server: MCPTool) -> None:
    pid = int(server.call("pid"))
    os.kill(pid, signal.SIGKILL)  # the server process this test's tool started
    replies = [server.call("add", {"a": 1, "b": 2}) for _ in range(4)]
    assert replies[-1] == "3", replies
    assert server.connections == 2
    assert int(server.call("pid")) != pid
