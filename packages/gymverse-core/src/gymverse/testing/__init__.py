"""Tiny real tokenizers and random causal LMs for tests and benchmarks: nothing is downloaded.

`tiny_tokenizer` trains a byte-level BPE tokenizer on the caller's corpus with a model family's special tokens and
its real chat template (``chat_templates.json``, copied verbatim from the models' ``tokenizer_config.json``);
`random_causal_lm` builds a small randomly initialised Llama or Qwen2 over a tokenizer's vocabulary.

``tokenizers``, ``transformers`` and ``torch`` are imported only when a function needs them, so importing this
module is cheap and needs none of them installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["FAMILIES", "Family", "chat_template", "random_causal_lm", "tiny_tokenizer"]

TEMPLATES_PATH = Path(__file__).with_name("chat_templates.json")

# The plain ChatML template (no system-prompt default, no tools): what tests use when no real family matters.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Family:
    """The special tokens a model family's tokenizer has (the first special token is the pad token)."""

    specials: tuple[str, ...]
    eos: str
    bos: str | None = None
    added: tuple[str, ...] = ()  # plain added tokens (not special: they survive `skip_special_tokens`)


_QWEN = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_QWEN_ADDED = ("<think>", "</think>", "<tool_response>", "</tool_response>", "<tool_call>", "</tool_call>")
_LLAMA3 = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")

FAMILIES: dict[str, Family] = {
    "qwen3": Family(_QWEN, "<|im_end|>", added=_QWEN_ADDED),
    "qwen3-thinking-2507": Family(_QWEN, "<|im_end|>", added=_QWEN_ADDED),
    "qwen2.5": Family(_QWEN, "<|im_end|>", added=_QWEN_ADDED),
    "llama3": Family(_LLAMA3, "<|eot_id|>", bos="<|begin_of_text|>"),
    "smollm2": Family(_QWEN, "<|im_end|>", bos="<|im_start|>"),
    "chatml": Family(_QWEN, "<|im_end|>"),
}


@cache
def _templates() -> dict[str, str]:
    templates: dict[str, str] = json.loads(TEMPLATES_PATH.read_text())
    return templates


def chat_template(family: str) -> str:
    """The real chat template of `family` (one of `FAMILIES`), verbatim."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; known: {', '.join(FAMILIES)}")
    return CHATML if family == "chatml" else _templates()[family]


def tiny_tokenizer(corpus: Iterable[str], family: str = "chatml", *, vocab_size: int = 512) -> Any:
    """A ``PreTrainedTokenizerFast``: byte-level BPE trained on `corpus`, with `family`'s tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    template = chat_template(family)
    spec = FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(spec.specials), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=spec.eos, bos_token=spec.bos, pad_token=spec.specials[0]
    )
    if spec.added:
        fast.add_tokens(list(spec.added))
    fast.chat_template = template
    return fast


def random_causal_lm(tokenizer: Any, *, arch: str = "llama", seed: int | None = 0, **config: Any) -> Any:
    """A randomly initialised 2-layer, 32-wide causal LM over `tokenizer` (an int: a vocabulary size).

    `config` overrides any config field (sizes, special token ids, ...). With a `seed` the weights are the same on
    every call and torch's global random state is left as it was; ``seed=None`` draws from the global state.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    classes = {"llama": LlamaConfig, "qwen2": Qwen2Config}
    if arch not in classes:
        raise ValueError(f"unknown architecture {arch!r}; known: {', '.join(classes)}")
    fields: dict[str, Any] = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    if isinstance(tokenizer, int):
        fields["vocab_size"] = tokenizer
    else:
        fields["vocab_size"] = len(tokenizer)
        fields.update(
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
        )
    cfg = classes[arch](**{**fields, **config})
    if seed is None:
        return AutoModelForCausalLM.from_config(cfg)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(cfg)
