"""Client for any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, llama.cpp, OpenAI)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
from gymverse.text import plural

from gymverse_synth.llm.base import BaseLLMClient, Completion, LLMError

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
BODY_EXCERPT = 500
#: Statuses with which a server refuses a request it will not serve as sent (vLLM: 400 ``BadRequestError`` for a
#: schema its grammar backend cannot compile; FastAPI-based servers: 422 for a field they do not know).
REFUSAL_STATUSES = frozenset({400, 422})
StructuredMode = Literal["auto", "on", "off"]


def _excerpt(text: str, limit: int = BODY_EXCERPT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    # building a context loads the CA bundle (tens of ms); do it once per process, not once per request
    return httpx.create_ssl_context()


class _Retryable(Exception):
    """One failed attempt worth retrying; `delay` overrides the backoff (from ``Retry-After``)."""

    def __init__(self, reason: str, status: int | None = None, body: str | None = None, delay: float | None = None):
        super().__init__(reason)
        self.reason, self.status, self.body, self.delay = reason, status, body, delay


class OpenAIClient(BaseLLMClient):
    """Chat completions over HTTP with retries (429/5xx/connection errors/timeouts), backoff and a concurrency cap.

    `base_url` is the server root or its ``/v1`` prefix (``http://localhost:8000`` and ``http://localhost:8000/v1``
    both work). `api_key` defaults to ``$OPENAI_API_KEY`` when set. Extra keyword arguments become default sampling
    parameters (``temperature``, ``max_tokens``, ``top_p``, ``seed``, ``stop``, ...), overridden per call.

    Structured output (`structured`): ``"auto"`` (default) sends a ``response_format`` JSON schema when a stage asks
    for one; a server that refuses such a request (HTTP 400/422) while the same request without it succeeds gets
    prompt-only requests from then on, and `structured_note` says so (printed once to stderr). ``"on"`` always sends
    it (a refusal is an error), ``"off"`` never does.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_concurrency: int = 16,
        structured: StructuredMode = "auto",
        **default_sampling: Any,
    ) -> None:
        super().__init__(model, **default_sampling)
        if structured not in ("auto", "on", "off"):
            raise ValueError(f"structured must be 'auto', 'on' or 'off', got {structured!r}")
        self.structured: StructuredMode = structured
        #: None: not yet known; True: the server honoured a schema; False: it refused one (prompt-only from then on)
        self.schema_accepted: bool | None = None
        self.structured_note: str | None = None
        self._note_lock = threading.Lock()
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_retries < 0 or max_concurrency < 1 or timeout <= 0 or backoff < 0:
            raise ValueError(
                f"need max_retries >= 0, max_concurrency >= 1, timeout > 0, backoff >= 0; got {max_retries}, "
                f"{max_concurrency}, {timeout}, {backoff}"
            )
        root = base_url.rstrip("/")
        self.base_url = root if root.endswith("/v1") else root + "/v1"
        self.url = self.base_url + "/chat/completions"
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.max_concurrency = max_concurrency
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._sync_sem = threading.BoundedSemaphore(max_concurrency)
        # an asyncio.Semaphore belongs to one event loop; a new loop (another asyncio.run) gets a new one
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_sem: asyncio.Semaphore | None = None
        # one connection pool per request (closed when it ends, so nothing leaks across event loops); the costly
        # part of a pool, the TLS context, is built once and shared
        self._verify: ssl.SSLContext = _shared_ssl_context()

    # -- request/response --------------------------------------------------------------------------------------

    @property
    def supports_json_schema(self) -> bool:
        """Whether stages should ask this server for a ``response_format`` schema (false once it refused one)."""
        return self.structured == "on" or (self.structured == "auto" and self.schema_accepted is not False)

    def _payload(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> dict[str, Any]:
        if not self.supports_json_schema:
            sampling = {k: v for k, v in sampling.items() if k != "response_format"}
        return {"model": self.model, "messages": messages, **sampling, "stream": False}

    def _without_schema(self, payload: dict[str, Any], err: LLMError) -> dict[str, Any]:
        """The request again without its schema when `err` may be the server refusing it; else `err` is raised."""
        if self.structured == "auto" and "response_format" in payload and err.status in REFUSAL_STATUSES:
            return {k: v for k, v in payload.items() if k != "response_format"}
        raise err

    @contextlib.contextmanager
    def _fallback(self, refusal: LLMError) -> Iterator[None]:
        """Around the request without the schema: if it is answered, the schema was what the server refused; if it
        fails too, the refusal was about something else and is the error to report."""
        try:
            yield
        except LLMError:
            raise refusal from None
        self._refused(refusal)

    def _refused(self, err: LLMError) -> None:
        """Record that the server refused a schema that it serves without; say so once."""
        with self._note_lock:
            self.schema_accepted = False
            if self.structured_note is not None:
                return
            self.structured_note = (
                f"{self.base_url} refused response_format json_schema (HTTP {err.status}: "
                f"{_excerpt(err.body or '', 200)}); structured output is off for this server, requests are prompt-only"
            )
        print(f"gymverse: {self.structured_note}", file=sys.stderr)

    def _accepted(self, payload: dict[str, Any], completion: Completion) -> Completion:
        if "response_format" in payload and self.schema_accepted is None:
            self.schema_accepted = True
        return completion

    def _backoff(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(max(hint, 0.0), self.max_backoff)
        return min(self.backoff * (2**attempt), self.max_backoff)

    def _handle(self, response: httpx.Response, started: float) -> Completion:
        status = response.status_code
        if status in RETRY_STATUSES or status >= 500:
            retry_after = response.headers.get("retry-after")
            try:
                delay = float(retry_after) if retry_after is not None else None
            except ValueError:
                delay = None
            raise _Retryable(f"HTTP {status}", status, response.text, delay)
        if status >= 400:
            raise LLMError(
                f"{self.url} answered HTTP {status} (not retried): {_excerpt(response.text)}",
                status=status,
                body=response.text,
            )
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise LLMError(
                f"{self.url} returned HTTP {status} but no choices[0].message.content ({type(err).__name__}: {err}): "
                f"{_excerpt(response.text)}",
                status=status,
                body=response.text,
            ) from err
        usage = data.get("usage") or {}
        return Completion(
            text=text or "",
            model=str(data.get("model") or self.model),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"),
            latency_s=time.perf_counter() - started,
        )

    def _give_up(self, last: _Retryable, attempts: int) -> LLMError:
        self.usage.add_failure()
        body = f": {_excerpt(last.body)}" if last.body else ""
        # the cause first: it is what a summary table's one-line reason shows
        return LLMError(
            f"{last.reason}{body} ({self.url}; gave up after {plural(attempts, 'attempt')}, "
            f"max_retries={self.max_retries})",
            status=last.status,
            body=last.body,
            attempts=attempts,
        )

    def _retry_delay(self, err: httpx.TransportError | _Retryable, attempt: int) -> float:
        """Seconds to wait after failed `attempt` (0-based) before the next; `LLMError` when it was the last."""
        last = _Retryable(self._transport_reason(err, self.timeout)) if isinstance(err, httpx.TransportError) else err
        if attempt == self.max_retries:
            raise self._give_up(last, attempt + 1)
        self.usage.add_retry()
        return self._backoff(attempt, last.delay)

    @staticmethod
    def _transport_reason(err: httpx.TransportError, timeout: float) -> str:
        if isinstance(err, httpx.TimeoutException):
            return f"timed out after {timeout:g}s ({type(err).__name__})"
        return f"connection error: {type(err).__name__}: {err}"

    # -- sync path ---------------------------------------------------------------------------------------------

    def _chat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        payload = self._payload(messages, sampling)
        try:
            return self._accepted(payload, self._post(payload))
        except LLMError as err:
            refusal, plain = err, self._without_schema(payload, err)
        with self._fallback(refusal):
            return self._post(plain)

    def _post(self, payload: dict[str, Any]) -> Completion:
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            try:
                with self._sync_sem, httpx.Client(timeout=self.timeout, verify=self._verify) as client:
                    response = client.post(self.url, json=payload, headers=self._headers)
                return self._handle(response, started)
            except (httpx.TransportError, _Retryable) as err:
                failed = err
            time.sleep(self._retry_delay(failed, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- async path --------------------------------------------------------------------------------------------

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._async_sem is None:
            self._loop, self._async_sem = loop, asyncio.Semaphore(self.max_concurrency)
        return self._async_sem

    async def _achat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        payload = self._payload(messages, sampling)
        try:
            return self._accepted(payload, await self._apost(payload))
        except LLMError as err:
            refusal, plain = err, self._without_schema(payload, err)
        with self._fallback(refusal):
            return await self._apost(plain)

    async def _apost(self, payload: dict[str, Any]) -> Completion:
        sem = self._semaphore()
        for attempt in range(self.max_retries + 1):
            started = time.perf_counter()
            try:
                async with sem, httpx.AsyncClient(timeout=self.timeout, verify=self._verify) as client:
                    response = await client.post(self.url, json=payload, headers=self._headers)
                return self._handle(response, started)
            except (httpx.TransportError, _Retryable) as err:
                failed = err
            await asyncio.sleep(self._retry_delay(failed, attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def __repr__(self) -> str:
        return f"OpenAIClient(base_url={self.base_url!r}, model={self.model!r})"
