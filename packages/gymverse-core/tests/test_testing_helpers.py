"""`gymverse.testing` (tiny tokenizers and models for tests) and `gymverse.make_dataset` (adapters' make-dataset)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import gymverse
import pytest
from gymverse.make_dataset import add_dataset_arguments, run_dataset_writer
from gymverse.testing import FAMILIES, TEMPLATES_PATH, chat_template


def test_importing_gymverse_testing_loads_no_ml_library() -> None:
    loaded = "[m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules]"
    code = f"import sys, gymverse.testing; print({loaded})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_family_has_its_template_and_the_templates_ship_in_the_package() -> None:
    shipped = json.loads(TEMPLATES_PATH.read_text())
    assert TEMPLATES_PATH.is_relative_to(Path(gymverse.__file__).parent)  # package data, not a tests folder
    assert set(FAMILIES) - {"chatml"} == set(shipped) - {"_source"}
    for family in FAMILIES:
        template = chat_template(family)
        assert FAMILIES[family].eos in template  # the template ends turns with the family's eos token
    with pytest.raises(ValueError, match=r"unknown model family 'gpt2'.*qwen3"):
        chat_template("gpt2")


def test_tiny_tokenizer_renders_its_family_and_models_are_seeded_without_touching_global_rng() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from gymverse.testing import random_causal_lm, tiny_tokenizer

    tok = tiny_tokenizer(["hello there, general kenobi"] * 2, "qwen3", vocab_size=300)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>user\nhi<|im_end|>\n") and text.endswith("<|im_start|>assistant\n")
    assert tok.convert_tokens_to_ids("<think>") != tok.unk_token_id and tok.eos_token == "<|im_end|>"

    before = torch.random.get_rng_state()
    a, b = random_causal_lm(tok, seed=3), random_causal_lm(tok, arch="llama", seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert a.config.vocab_size == len(tok) and a.config.eos_token_id == tok.eos_token_id
    qwen = random_causal_lm(64, arch="qwen2", seed=None, hidden_size=16, num_attention_heads=2, num_key_value_heads=1)
    assert type(qwen).__name__ == "Qwen2ForCausalLM" and qwen.config.vocab_size == 64
    with pytest.raises(ValueError, match="unknown architecture 'gpt2'"):
        random_causal_lm(tok, arch="gpt2")


def _dataset_args(argv: list[str], complexity: int | None = None, split: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="x")
    add_dataset_arguments(parser, suffix=".jsonl", complexity=complexity, split=split)
    return parser.parse_args(argv)


def test_dataset_arguments_and_writer(capsys: pytest.CaptureFixture[str]) -> None:
    args = _dataset_args(["--envs", " game:A, ,logic:B ", "--n", "3", "--out", "o.jsonl"])
    assert (args.seed, args.complexity) == (0, None) and not hasattr(args, "split")
    with_split = _dataset_args(["--envs", "a", "--n", "1", "--out", "o", "--split", "val"], complexity=1, split=True)
    assert (with_split.complexity, with_split.split) == (1, "val")

    seen: list[list[str]] = []

    def record(envs: list[str]) -> str:
        seen.append(envs)
        return "wrote 6 rows"

    assert run_dataset_writer(args, record, prog="gymverse-x") == 0
    assert seen == [["game:A", "logic:B"]] and capsys.readouterr().out == "wrote 6 rows\n"

    def bad(envs: list[str]) -> str:
        raise ValueError("unknown env id 'game:A'")

    assert run_dataset_writer(args, bad, prog="gymverse-x") == 2
    assert capsys.readouterr().err == "gymverse-x: error: unknown env id 'game:A'\n"
