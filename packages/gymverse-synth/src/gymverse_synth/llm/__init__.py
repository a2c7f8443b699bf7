"""LLM access: one protocol (`LLMClient`), HTTP and local backends, a record/replay cache, and `get_client`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymverse_synth.llm.base import BaseLLMClient, Completion, LLMClient, LLMError, Message, Usage, validate_messages
from gymverse_synth.llm.openai import OpenAIClient
from gymverse_synth.llm.replay import RecordReplayClient, ReplayMiss, request_key

__all__ = [
    "BaseLLMClient",
    "Completion",
    "LLMClient",
    "LLMError",
    "Message",
    "OpenAIClient",
    "RecordReplayClient",
    "ReplayMiss",
    "TransformersClient",
    "Usage",
    "get_client",
    "load_smollm2",
    "request_key",
    "validate_messages",
]


def __getattr__(name: str) -> Any:
    # the local backend imports torch/transformers lazily; keep `import gymverse_synth.llm` light
    if name in ("TransformersClient", "load_smollm2", "smollm2_client"):
        from gymverse_synth.llm import local

        return getattr(local, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_client(spec: str, *, model: str | None = None, **kwargs: Any) -> BaseLLMClient:
    """Build a client from a short spec.

    - ``"local"``: the embedded SmolLM2-135M-Instruct (`kwargs` go to `TransformersClient`, plus ``cache_dir``).
    - ``"http://host:port[/v1]"`` / ``"https://..."``: `OpenAIClient`; `model` defaults to ``"default"``.
    - ``"replay:PATH"``: `RecordReplayClient` in replay mode over a recorded JSONL file.
    """
    if spec == "local":
        from gymverse_synth.llm.local import smollm2_client

        return smollm2_client(**kwargs)
    if spec.startswith(("http://", "https://")):
        return OpenAIClient(spec, model or "default", **kwargs)
    if spec.startswith("replay:"):
        path = spec.removeprefix("replay:")
        if not path:
            raise ValueError("replay spec needs a file: 'replay:PATH'")
        return RecordReplayClient(None, Path(path), mode="replay", model=model)
    raise ValueError(f"unknown LLM spec {spec!r}: expected 'local', 'http(s)://...' or 'replay:PATH'")
