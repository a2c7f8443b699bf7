"""The LLM client contract: chat messages in, text out, sync and async, with token accounting."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

ROLES = frozenset({"system", "user", "assistant", "tool"})


class LLMError(RuntimeError):
    """A request failed for good (after retries); carries the HTTP status and a body excerpt when there was one."""

    def __init__(self, message: str, *, status: int | None = None, body: str | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.attempts = attempts


@dataclass(frozen=True)
class Completion:
    """One model reply plus what it cost."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0
    cached: bool = False

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)


@dataclass
class Usage:
    """Running totals over every request a client made (thread-safe through `record`)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0
    cached: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def record(self, completion: Completion) -> None:
        """Add one finished request."""
        with self._lock:
            self.requests += 1
            self.prompt_tokens += completion.prompt_tokens
            self.completion_tokens += completion.completion_tokens
            self.cached += int(completion.cached)

    def add_retry(self) -> None:
        """Count one retried attempt."""
        with self._lock:
            self.retries += 1

    def add_failure(self) -> None:
        """Count one request that failed for good."""
        with self._lock:
            self.failures += 1

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        """Plain-JSON form."""
        fields = ("requests", "prompt_tokens", "completion_tokens", "retries", "failures", "cached")
        return {f: getattr(self, f) for f in fields}


@runtime_checkable
class LLMClient(Protocol):
    """What every pipeline stage needs from a model: `complete` (text) and `chat` (text + usage), sync and async."""

    model: str
    usage: Usage

    def complete(self, messages: Sequence[Message], **sampling: Any) -> str:
        """The reply text to `messages`."""
        ...

    async def acomplete(self, messages: Sequence[Message], **sampling: Any) -> str:
        """Async `complete`."""
        ...

    def chat(self, messages: Sequence[Message], **sampling: Any) -> Completion:
        """The reply to `messages` with its token counts."""
        ...

    async def achat(self, messages: Sequence[Message], **sampling: Any) -> Completion:
        """Async `chat`."""
        ...


def json_schema_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-style ``response_format`` asking for JSON that matches `schema` (vLLM, SGLang, Ollama, OpenAI)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema)}}


def bounded_schema(schema: Any, max_string: int = 160, max_items: int = 3) -> Any:
    """`schema` with every free string capped at `max_string` characters and every array at `max_items` items.

    A server decoding under a schema cannot end a string or a list early the way our local decoder does, and a
    small model rambles: without bounds it spends the token budget inside one value and the JSON is cut off.
    Strings with a ``pattern`` or ``format`` keep no length bound (vLLM refuses the two together), and bounds the
    schema already sets are kept.
    """
    if isinstance(schema, list):
        return [bounded_schema(v, max_string, max_items) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded_schema(v, max_string, max_items) for k, v in schema.items()}
    if out.get("type") == "string" and not {"pattern", "format", "enum", "maxLength"} & out.keys():
        out["maxLength"] = max_string
    if out.get("type") == "array" and "maxItems" not in out:
        out["maxItems"] = max(max_items, int(out.get("minItems", 0)))
    return out


def with_schema(client: LLMClient, sampling: Mapping[str, Any], response_format: dict[str, Any]) -> dict[str, Any]:
    """`sampling` plus `response_format` when `client` honours schemas (``supports_json_schema``), else unchanged.

    Clients that do not say so (replays, plain test doubles) keep their exact requests; an HTTP client says so until
    its server refuses a schema (see `OpenAIClient`), so a run needs no setting per server.
    """
    if getattr(client, "supports_json_schema", False) and "response_format" not in sampling:
        return {**sampling, "response_format": response_format}
    return dict(sampling)


def validate_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Copy `messages` into plain dicts, raising ValueError that names the first malformed message."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise ValueError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages must not be empty")
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content', got {m!r:.120}")
        if m["role"] not in ROLES:
            raise ValueError(f"messages[{i}] has unknown role {m['role']!r}; expected one of {sorted(ROLES)}")
        if not isinstance(m["content"], str):
            raise ValueError(f"messages[{i}]['content'] must be a string, got {type(m['content']).__name__}")
        out.append({"role": str(m["role"]), "content": m["content"]})
    return out


class BaseLLMClient(ABC):
    """Shared plumbing: subclasses implement `_chat` (and `_achat` when they have a native async path)."""

    model: str

    def __init__(self, model: str, **default_sampling: Any) -> None:
        self.model = model
        self.default_sampling: dict[str, Any] = dict(default_sampling)
        self.usage = Usage()

    def _sampling(self, sampling: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.default_sampling, **sampling}
        return {k: v for k, v in merged.items() if v is not None}

    @abstractmethod
    def _chat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        """Run one request (blocking)."""

    async def _achat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        # blocking backends run in a worker thread so they never stall the event loop
        return await asyncio.to_thread(self._chat, messages, sampling)

    def chat(self, messages: Sequence[Message], **sampling: Any) -> Completion:
        """The reply to `messages` with its token counts."""
        completion = self._chat(validate_messages(messages), self._sampling(sampling))
        self.usage.record(completion)
        return completion

    async def achat(self, messages: Sequence[Message], **sampling: Any) -> Completion:
        """Async `chat`."""
        completion = await self._achat(validate_messages(messages), self._sampling(sampling))
        self.usage.record(completion)
        return completion

    def complete(self, messages: Sequence[Message], **sampling: Any) -> str:
        """The reply text to `messages`."""
        return self.chat(messages, **sampling).text

    async def acomplete(self, messages: Sequence[Message], **sampling: Any) -> str:
        """Async `complete`."""
        return (await self.achat(messages, **sampling)).text

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
