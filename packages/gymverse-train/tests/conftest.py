"""Tiny random Llama/Qwen2 policies with a byte-level BPE tokenizer trained here and SmolLM2's real chat template."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gymverse.testing import random_causal_lm, tiny_tokenizer

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

CORPUS = [
    "Write the word cat inside \\boxed{}, like this: \\boxed{cat}. Correct. Wrong: expected 'dog'.",
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. system user assistant",
    "I am thinking of an integer between 1 and 10. You have 10 guesses. Answer with \\boxed{<integer>}.",
    "cat dog sun red box cup hat pen map key car egg ice jam owl bee fox ant bus fan apple river stone",
    "\\boxed{1} \\boxed{2} \\boxed{3} too low. Higher. too high. Lower. Invalid action: no \\boxed{...} found",
]


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on the spot, with SmolLM2's chat template."""
    return tiny_tokenizer(CORPUS * 4, "smollm2", vocab_size=512)


def build_model(tokenizer: Any, family: str = "llama", seed: int = 0) -> Any:
    """A ~0.2M-parameter random causal LM over `tokenizer`'s vocabulary."""
    return random_causal_lm(tokenizer, arch=family, seed=seed, max_position_embeddings=1024)


@pytest.fixture
def make_model(tokenizer: Any) -> Callable[..., Any]:
    """``make_model(family="llama"|"qwen2", seed=0)``: a fresh tiny model (same seed, same weights)."""
    return lambda family="llama", seed=0: build_model(tokenizer, family, seed)


@pytest.fixture
def model_dir(tmp_path: Path, tokenizer: Any) -> Path:
    """A tiny Llama saved with its tokenizer, loadable by path like any local HF model."""
    path = tmp_path / "tiny-llama"
    build_model(tokenizer).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def action_sample(tokenizer: Any) -> Callable[[float], Any]:
    """``action_sample(advantage)``: a chat prompt plus the action ``\\boxed{cat}`` (the only trained tokens)."""
    return lambda advantage: _action_sample(tokenizer, advantage)


def _action_sample(tokenizer: Any, advantage: float) -> Any:
    from gymverse.rollout import ChatRenderer
    from gymverse_train.update import Sample

    prompt = ChatRenderer(tokenizer).initial("Write the word cat inside \\boxed{}, like this: \\boxed{cat}")
    action = tokenizer.encode("\\boxed{cat}<|im_end|>", add_special_tokens=False)
    n = len(prompt)
    return Sample(prompt + action, [0.0] * n + [advantage] * len(action), [0] * n + [1] * len(action))
