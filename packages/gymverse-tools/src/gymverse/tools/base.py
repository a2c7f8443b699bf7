"""The `Tool` interface: parse a tool call out of the model's text, execute it, return text for the model."""

from __future__ import annotations

from abc import ABC, abstractmethod


class ToolCallError(ValueError):
    """A tool call that was recognized but is malformed (the message is shown to the model)."""


def trim(text: str, max_chars: int) -> str:
    """Cut `text` to `max_chars`, keeping head and tail around a marker."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    return f"{text[:head]}\n[... {len(text) - head - tail} chars truncated ...]\n{text[len(text) - tail :]}"


def extract_tag(action: str, tag: str) -> str | None:
    """Content of the first ``<tag>...</tag>`` in `action`; None if absent; `ToolCallError` if unclosed.

    Two linear scans (a lazy regex is quadratic on thousands of unclosed opening tags).
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = action.find(opening)
    if start < 0:
        return None
    end = action.find(closing, start + len(opening))
    if end < 0:
        raise ToolCallError(f"{opening} is opened but never closed; write {opening}...{closing}")
    return action[start + len(opening) : end].strip()


class Tool(ABC):
    """A tool the agent calls from its text. `parse` finds a call, `execute` runs it; both return plain text."""

    name: str = "tool"

    @abstractmethod
    def parse(self, action: str) -> str | None:
        """The call's payload if `action` calls this tool, else None; raise `ToolCallError` if malformed."""

    @abstractmethod
    def execute(self, payload: str) -> str:
        """Run one call and return the text the agent sees (errors are returned as text, not raised)."""

    @abstractmethod
    def instruction(self) -> str:
        """One paragraph telling the agent how to call this tool."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (processes, connections)."""
