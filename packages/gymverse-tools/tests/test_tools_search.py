"""SearchTool against the embedded BM25 retrieval server on loopback, plus timeouts and server failures."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from gymverse.tools import SearchTool, ToolCallError
from gymverse.tools.retrieval_server import BM25Index, RetrievalServer

CORPUS = [
    "Paris is the capital and largest city of France.",
    "Berlin is the capital of Germany and its largest city.",
    "The mitochondrion is the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The Danube flows through Vienna, Budapest and Belgrade.",
]


@pytest.fixture(scope="module")
def server() -> Iterator[RetrievalServer]:
    with RetrievalServer(CORPUS) as srv:
        yield srv


def test_server_listens_on_a_free_loopback_port(server: RetrievalServer) -> None:
    assert server.host == "127.0.0.1"
    assert server.port > 0
    health = httpx.get(f"{server.url}/health", timeout=5).json()
    assert health == {"status": "ok", "documents": len(CORPUS)}
    bad = httpx.post(f"{server.url}/search", json={"query": "", "k": 2}, timeout=5)
    assert bad.status_code == 422


def test_bm25_ranks_the_relevant_document_first(server: RetrievalServer) -> None:
    tool = SearchTool(server.url, k=2)
    try:
        out = tool.execute("capital of Germany")
        lines = out.splitlines()
        assert lines[0].startswith("Doc 1 (score ")
        assert "Berlin" in lines[0]
        assert len(lines) == 2
        assert "powerhouse" in tool.execute("what is the powerhouse of the cell")
        assert tool.execute("quantum chromodynamics") == "No results for 'quantum chromodynamics'."
    finally:
        tool.close()


def test_index_directly() -> None:
    hits = BM25Index(CORPUS).search("Vienna Budapest", k=3)
    assert hits[0]["id"] == 4
    assert all(h["score"] > 0 for h in hits)
    with pytest.raises(ValueError, match="empty"):
        BM25Index([])


def test_parse() -> None:
    tool = SearchTool("http://127.0.0.1:9")
    try:
        assert tool.parse("I will look it up: <search> capital of France </search>") == "capital of France"
        assert tool.parse(r"\boxed{Paris}") is None
        with pytest.raises(ToolCallError, match="never closed"):
            tool.parse("<search>capital")
        with pytest.raises(ToolCallError, match="empty"):
            tool.parse("<search>  </search>")
    finally:
        tool.close()


def _misbehaving_app() -> Any:
    app = FastAPI()

    @app.post("/slow/search")
    async def slow() -> dict[str, Any]:
        await asyncio.sleep(1.5)
        return {"results": []}

    @app.post("/broken/search")
    async def broken() -> PlainTextResponse:
        return PlainTextResponse("index exploded", status_code=500)

    @app.post("/garbage/search")
    async def garbage() -> PlainTextResponse:
        return PlainTextResponse("not json")

    return app


def test_timeouts_and_server_errors_are_clear_messages() -> None:
    with RetrievalServer(app=_misbehaving_app()) as srv:
        slow = SearchTool(f"{srv.url}/slow", timeout=0.3)
        broken = SearchTool(f"{srv.url}/broken")
        garbage = SearchTool(f"{srv.url}/garbage")
        try:
            assert (
                slow.execute("q")
                == f"Search error: the retrieval service at {srv.url}/slow did not answer within 0.3 s."
            )
            assert broken.execute("q") == "Search error: the retrieval service returned HTTP 500: index exploded"
            assert garbage.execute("q").startswith("Search error: the retrieval service returned a malformed response")
        finally:
            for tool in (slow, broken, garbage):
                tool.close()


def test_unreachable_service() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tool = SearchTool(f"http://127.0.0.1:{port}", timeout=1)
    try:
        assert (
            tool.execute("q")
            == f"Search error: could not reach the retrieval service at http://127.0.0.1:{port} (ConnectError)."
        )
    finally:
        tool.close()


def test_server_needs_documents_or_app() -> None:
    with pytest.raises(ValueError, match="documents or an app"):
        RetrievalServer()
