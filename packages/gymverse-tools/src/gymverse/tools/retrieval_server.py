"""Embedded retrieval service: BM25 (`bm25s`) over a local corpus, served with FastAPI + uvicorn.

API: ``POST /search {"query": str, "k": int}`` -> ``{"results": [{"id", "text", "score"}]}``; ``GET /health``.
Needs the ``server`` and ``search`` extras; imported lazily so core does not depend on them.
"""

# No `from __future__ import annotations`: FastAPI must see the request model class, defined in a function.
from collections.abc import Sequence
from typing import Any

from gymverse.server.runner import BackgroundServer


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


class RetrievalServer(BackgroundServer):
    """Runs an app (by default the BM25 app over `documents`) with uvicorn in a background thread on loopback."""

    def __init__(
        self, documents: Sequence[str] | None = None, *, app: Any = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if app is None and documents is None:
            raise ValueError("RetrievalServer needs documents or an app")
        super().__init__(app if app is not None else create_app(documents or []), host=host, port=port)
