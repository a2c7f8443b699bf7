"""Shared fixtures of the gymverse-synth tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def smollm2_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SmolLM2-135M-Instruct, converted once per session into a temporary cache.

    Setting ``GYMVERSE_CACHE`` explicitly (e.g. to a directory CI keeps between runs) uses that cache instead, so
    the conversion (15 s on a quiet 2-core machine, minutes under load) happens once per machine.
    """
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    import torch
    from gymverse_synth.llm.local import smollm2_client

    torch.set_num_threads(1)  # under CI load two threads were 5-10x slower
    cache: Path | None = None
    if not os.environ.get("GYMVERSE_CACHE"):
        cache = tmp_path_factory.mktemp("gymverse-cache") / "smollm2"
    return smollm2_client(cache_dir=cache)
