"""Embedded retrieval service: BM25 (`bm25s`) over a local corpus, served with FastAPI + uvicorn.

API: ``POST /search {"query": str, "k": int}`` -> ``{"results": [{"id", "text", "score"}]}``; ``GET /health``.
Needs the ``server`` and ``search`` extras; imported lazily so core does not depend on them.
"""

# No `from __future__ import annotations`: FastAPI must see the request model class, defined in a function.
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any


class BM25Index:
    """A BM25 index over `documents` (strings)."""

    def __init__(self, documents: Sequence[str]) -> None:
        import bm25s

        if not documents:
            raise ValueError("the retrieval corpus is empty")
        self.documents = [str(d) for d in documents]
        self._bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(self.documents, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int = 3) -> list[dict[str, Any]]:
        """Top-`k` documents for `query` with their BM25 scores (zero-score hits dropped)."""
        k = max(1, min(int(k), len(self.documents)))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [
            {"id": int(i), "text": self.documents[int(i)], "score": float(s)}
            for i, s in zip(docs[0], scores[0])
            if float(s) > 0
        ]


def create_app(documents: Sequence[str]) -> Any:
    """The FastAPI app serving a BM25 index over `documents`."""
    from fastapi import FastAPI, HTTPException
    from pydantic import BaseModel, Field

    index = BM25Index(documents)

    class Query(BaseModel):
        query: str = Field(min_length=1, max_length=4000)
        k: int = Field(default=3, ge=1, le=100)

    app = FastAPI(title="GymVerse retrieval")

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "documents": len(index.documents)}

    @app.post("/search")
    def search(q: Query) -> dict[str, Any]:
        if not q.query.strip():
            raise HTTPException(status_code=422, detail="query is blank")
        return {"results": index.search(q.query, q.k)}

    return app


class RetrievalServer:
    """Runs an app (by default the BM25 app over `documents`) with uvicorn in a background thread on loopback."""

    def __init__(
        self, documents: Sequence[str] | None = None, *, app: Any = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if app is None and documents is None:
            raise ValueError("RetrievalServer needs documents or an app")
        self.app = app if app is not None else create_app(documents or [])
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server."""
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> "RetrievalServer":
        """Start serving; returns once the port accepts connections."""
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"retrieval server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> "RetrievalServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
