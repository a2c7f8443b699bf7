"""Test helpers for the RL2 adapter: a Qwen3 tokenizer, RL2's composed config, a call tracer, child cleanup."""

from __future__ import annotations

import multiprocessing
import sys
import threading
from pathlib import Path
from typing import Any

import RL2
from gymverse.testing import tiny_tokenizer

CORPUS = [
    "I am thinking of an integer between 1 and 10. You have 10 guesses. Answer with \\boxed{<integer>}.",
    "5 is too low. Higher. 8 is too high. Lower. Correct! The number was 7. Between 1 and 5000.",
    "My answer is \\boxed{1}. I am not sure, maybe seven? Invalid action format: expected \\boxed{...}.",
    "Move the disks from peg A to peg C. The grid is 3x3. user assistant system 0123456789",
]


def build_tokenizer(path: Path) -> Path:
    """A byte-level BPE tokenizer with Qwen3's special tokens and real chat template, saved for `from_pretrained`."""
    tiny_tokenizer(CORPUS * 4, "qwen3", vocab_size=700).save_pretrained(path)
    return path


def stop_children() -> None:
    """End the SGLang stand-in processes RL2 started (RL2 0.0.2 never stops them itself)."""
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
        if child.is_alive():
            child.kill()
            child.join(5)


def rl2_config(overrides: list[str]) -> Any:
    """RL2's own PPO config (`RL2/trainer/config/ppo.yaml`) composed by Hydra with `overrides`."""
    from hydra import compose, initialize_config_dir

    config_dir = str(Path(RL2.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo", overrides=overrides)


class RL2Trace:
    """Records ``module.qualname`` of every RL2 function called while active (all threads)."""

    def __init__(self) -> None:
        self.root = str(Path(RL2.__file__).parent)
        self.names: set[str] = set()

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(self.root):
                module = frame.f_globals.get("__name__", "?")
                self.names.add(f"{module}.{code.co_qualname}")

    def __enter__(self) -> RL2Trace:
        sys.setprofile(self._profile)
        threading.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)
