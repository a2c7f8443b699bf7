"""Record/replay cache: answers keyed by a stable hash of (model, messages, sampling), stored as JSONL."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gymverse_synth.llm.base import BaseLLMClient, Completion, LLMClient

Mode = Literal["record", "replay", "auto"]
MODES: tuple[str, ...] = ("record", "replay", "auto")


class ReplayMiss(LookupError):
    """Replay mode met a request that was never recorded."""

    def __init__(self, key: str, path: Path, excerpt: str) -> None:
        super().__init__(
            f"no recorded reply for request {key[:16]}... in {path} (last message: {excerpt!r}); "
            "re-record with mode='record' or 'auto' and a live client"
        )
        self.key = key


def request_key(model: str, messages: list[dict[str, str]], sampling: Mapping[str, Any]) -> str:
    """Stable SHA-256 of the request: canonical JSON with sorted keys, so dict order never changes the key."""
    canonical = json.dumps(
        {"model": model, "messages": messages, "sampling": dict(sampling)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _excerpt(messages: list[dict[str, str]], limit: int = 120) -> str:
    text = messages[-1]["content"] if messages else ""
    return text if len(text) <= limit else text[:limit] + "..."


class RecordReplayClient(BaseLLMClient):
    """Wrap `inner` so every answer is written to `path` (record), read back (replay), or both (auto).

    - ``record``: always ask `inner`, append the answer (a later record of the same key wins).
    - ``replay``: never ask anyone; a request that is not in the file raises `ReplayMiss`. `inner` may be None.
    - ``auto``: replay when recorded, otherwise ask `inner` and record.

    The key covers the model name, the messages and the per-call sampling arguments (not `inner`'s own defaults,
    so pass sampling explicitly where it matters). Without `inner`, the model name comes from `model` or, if the
    file holds exactly one model, from the file.
    """

    def __init__(
        self, inner: LLMClient | None, path: str | Path, mode: Mode = "auto", *, model: str | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if inner is None and mode != "replay":
            raise ValueError(f"mode={mode!r} needs an inner client to ask on a miss; only 'replay' works without")
        self.inner = inner
        self.path = Path(path)
        self.mode: Mode = mode
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = self._load()
        name = model or (inner.model if inner is not None else None) or self._single_model()
        super().__init__(name)

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            if self.mode == "replay":
                raise FileNotFoundError(f"replay file {self.path} does not exist")
            return {}
        entries: dict[str, dict[str, Any]] = {}
        with self.path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    entries[entry["key"]] = entry
                except (ValueError, KeyError, TypeError) as err:
                    why = f"{type(err).__name__}: {err}"
                    raise ValueError(f"{self.path}:{lineno}: not a replay record ({why})") from err
        return entries

    def _single_model(self) -> str:
        models = sorted({str(e.get("model", "")) for e in self._entries.values()})
        if len(models) != 1:
            raise ValueError(
                f"{self.path} holds replies of {len(models)} models {models[:5]}; pass model=... to choose one"
            )
        return models[0]

    def __len__(self) -> int:
        return len(self._entries)

    def _lookup(self, key: str, messages: list[dict[str, str]]) -> Completion | None:
        if self.mode == "record":
            return None
        entry = self._entries.get(key)
        if entry is None:
            if self.mode == "replay":
                raise ReplayMiss(key, self.path, _excerpt(messages))
            return None
        usage = entry.get("usage") or {}
        return Completion(
            text=entry["text"],
            model=self.model,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            finish_reason=entry.get("finish_reason"),
            cached=True,
        )

    def _store(self, key: str, messages: list[dict[str, str]], sampling: dict[str, Any], c: Completion) -> None:
        entry = {
            "key": key,
            "model": self.model,
            "messages": messages,
            "sampling": sampling,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "usage": {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens},
        }
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
            self._entries[key] = entry

    def _chat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        key = request_key(self.model, messages, sampling)
        hit = self._lookup(key, messages)
        if hit is not None:
            return hit
        assert self.inner is not None  # guaranteed by the constructor for record/auto
        completion = self.inner.chat(messages, **sampling)
        self._store(key, messages, sampling, completion)
        return completion

    async def _achat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        key = request_key(self.model, messages, sampling)
        hit = self._lookup(key, messages)
        if hit is not None:
            return hit
        assert self.inner is not None
        completion = await self.inner.achat(messages, **sampling)
        self._store(key, messages, sampling, completion)
        return completion

    def __repr__(self) -> str:
        return f"RecordReplayClient({self.inner!r}, path={str(self.path)!r}, mode={self.mode!r})"
