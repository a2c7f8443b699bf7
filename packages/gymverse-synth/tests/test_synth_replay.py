"""Record/replay cache: recorded answers replay identically, misses fail loudly, keys are stable."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from gymverse_synth.llm import OpenAIClient, RecordReplayClient, ReplayMiss, get_client, request_key
from gymverse_synth.testing import ScriptedLLMServer

Q1 = [{"role": "user", "content": "first question"}]
Q2 = [{"role": "user", "content": "second question"}]


def test_record_then_replay_equal_without_a_server(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "llm.jsonl"
    with ScriptedLLMServer(["answer one", "answer two"]) as server:
        rec = RecordReplayClient(OpenAIClient(server.base_url, "m"), path, mode="record")
        recorded = [rec.complete(Q1, temperature=0.0), rec.complete(Q2, temperature=0.0)]
    assert recorded == ["answer one", "answer two"]
    assert len(path.read_text().splitlines()) == 2

    replay = RecordReplayClient(None, path, mode="replay")  # server gone: only the file answers
    assert replay.model == "m"
    completion = replay.chat(Q2, temperature=0.0)
    assert completion.text == "answer two"
    assert completion.cached
    assert completion.completion_tokens == 2  # usage survives the round trip
    assert replay.complete(Q1, temperature=0.0) == "answer one"
    assert asyncio.run(replay.acomplete(Q1, temperature=0.0)) == "answer one"
    assert replay.usage.cached == 3


def test_replay_miss_names_key_and_message(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    with ScriptedLLMServer(["a"]) as server:
        RecordReplayClient(OpenAIClient(server.base_url, "m"), path, mode="record").complete(Q1)
    replay = get_client(f"replay:{path}")
    # different sampling is a different request
    key = request_key("m", Q1, {"temperature": 0.5})
    with pytest.raises(ReplayMiss, match=rf"{key[:16]}.*first question") as info:
        replay.complete(Q1, temperature=0.5)
    assert info.value.key == key
    with pytest.raises(ReplayMiss, match="second question"):
        replay.complete(Q2)


def test_auto_mode_asks_only_on_miss(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    with ScriptedLLMServer(["fresh"]) as server:
        auto = RecordReplayClient(OpenAIClient(server.base_url, "m"), path, mode="auto")
        assert auto.complete(Q1) == "fresh"
        assert auto.complete(Q1) == "fresh"  # served from the cache: the server has no second reply
        assert asyncio.run(auto.acomplete(Q1)) == "fresh"
        assert len(server.requests) == 1
        # a new wrapper over the same file starts warm
        again = RecordReplayClient(OpenAIClient(server.base_url, "m"), path, mode="auto")
        assert again.complete(Q1) == "fresh"
        assert len(server.requests) == 1


def test_async_record(tmp_path: Path) -> None:
    path = tmp_path / "llm.jsonl"
    with ScriptedLLMServer(["x"]) as server:
        rec = RecordReplayClient(OpenAIClient(server.base_url, "m"), path, mode="record")
        assert asyncio.run(rec.acomplete(Q1, max_tokens=3)) == "x"
    entry = json.loads(path.read_text())
    assert entry["key"] == request_key("m", Q1, {"max_tokens": 3})
    assert entry["sampling"] == {"max_tokens": 3}


def test_key_is_stable_and_order_insensitive() -> None:
    a = request_key("m", Q1, {"temperature": 0.0, "max_tokens": 5})
    b = request_key("m", Q1, {"max_tokens": 5, "temperature": 0.0})
    assert a == b
    assert a != request_key("other", Q1, {"temperature": 0.0, "max_tokens": 5})
    assert a != request_key("m", Q2, {"temperature": 0.0, "max_tokens": 5})
    # pinned so an accidental change of the key scheme (which would orphan every recorded cache) is noticed
    assert (
        request_key("m", [{"content": "hi", "role": "user"}], {})
        == "568858744b7a8378a2df46da54df39455aca6fea9901cfe398631ffc30030a86"
    )


def test_bad_configurations_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RecordReplayClient(None, tmp_path / "missing.jsonl", mode="replay")
    with pytest.raises(ValueError, match="needs an inner client"):
        RecordReplayClient(None, tmp_path / "x.jsonl", mode="auto")
    with pytest.raises(ValueError, match="mode must be one of"):
        RecordReplayClient(None, tmp_path / "x.jsonl", mode="rewind")  # type: ignore[arg-type]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "k", "model": "m", "text": "t"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a replay record"):
        RecordReplayClient(None, bad, mode="replay")
    two = tmp_path / "two.jsonl"
    two.write_text('{"key": "a", "model": "m1", "text": "t"}\n{"key": "b", "model": "m2", "text": "t"}\n')
    with pytest.raises(ValueError, match="2 models"):
        RecordReplayClient(None, two, mode="replay")
    assert RecordReplayClient(None, two, mode="replay", model="m2").model == "m2"
