"""``gymverse evaluate --llm``: the client comes from whichever package registers one (gymverse-synth), never from
an import of that package, and its absence is a one-line usage error."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from gymverse.evaluate.cli import LLM_CLIENTS_GROUP, main


def test_llm_without_a_client_package_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.metadata.entry_points

    def entry_points(**params: Any) -> Any:
        return [] if params.get("group") == LLM_CLIENTS_GROUP else real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    code = main(["game:GuessTheNumber", "--llm", "local", "--levels", "1", "--seeds", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "install gymverse-synth" in err and "--llm local" in err
    assert not (tmp_path / "evaluation.json").exists()


def test_the_registered_client_builder_is_called_with_the_spec_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from gymverse.evaluate.cli import llm_client

    seen: list[tuple[str, str | None]] = []

    class _EntryPoint:
        name = "stand-in"

        def load(self) -> Any:
            def build(spec: str, model: str | None = None) -> str:
                seen.append((spec, model))
                return "client"

            return build

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **params: [_EntryPoint()])
    assert llm_client("http://127.0.0.1:1/v1", "qwen") == "client"
    assert seen == [("http://127.0.0.1:1/v1", "qwen")]
