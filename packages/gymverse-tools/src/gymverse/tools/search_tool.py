"""Search tool: ``<search>query</search>`` against an HTTP retrieval service (see `retrieval_server`)."""

from __future__ import annotations

from typing import Any

from gymverse.tools.base import Tool, ToolCallError, extract_tag, trim


class SearchTool(Tool):
    """Queries ``POST {url}/search``; timeouts and server errors come back as clear text, never exceptions."""

    name = "search"

    def __init__(self, url: str, *, k: int = 3, timeout: float = 5.0, max_output_chars: int = 2000) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.k = k
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self._client = httpx.Client(timeout=timeout)

    def parse(self, action: str) -> str | None:
        """The query of the first ``<search>`` tag, if any."""
        query = extract_tag(action, "search")
        if query is not None and not query:
            raise ToolCallError("the search query is empty; write <search>your query</search>")
        return query

    def _request(self, query: str) -> Any:
        import httpx

        try:
            resp = self._client.post(f"{self.url}/search", json={"query": query, "k": self.k})
        except httpx.TimeoutException:
            return f"Search error: the retrieval service at {self.url} did not answer within {self.timeout} s."
        except httpx.HTTPError as exc:
            return f"Search error: could not reach the retrieval service at {self.url} ({type(exc).__name__})."
        if resp.status_code != 200:
            return f"Search error: the retrieval service returned HTTP {resp.status_code}: {resp.text[:200]}"
        try:
            return resp.json()["results"]
        except (ValueError, KeyError, TypeError):
            return f"Search error: the retrieval service returned a malformed response: {resp.text[:200]}"

    def execute(self, payload: str) -> str:
        """The top documents, numbered, or an error message."""
        results = self._request(payload)
        if isinstance(results, str):
            return results
        if not results:
            return f"No results for {payload!r}."
        lines = [f"Doc {i} (score {r['score']:.2f}): {r['text']}" for i, r in enumerate(results, 1)]
        return trim("\n".join(lines), self.max_output_chars)

    def instruction(self) -> str:
        """How to call it."""
        return "To search the knowledge base, write <search>query</search>; you will see the top documents."

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
