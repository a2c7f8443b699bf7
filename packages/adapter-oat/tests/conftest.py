"""Fixtures for the oat adapter tests (run in `.venv-oat`, see `.ci/run`).

Stand-ins replace only what cannot run on a CPU machine, and nothing of oat itself:

* `vllm` (tests/standins/vllm): generation by a tiny Hugging Face model on CPU, in vLLM's output format;
* `launchpad` (tests/standins/launchpad): process launching (one forked process per node, courier-style calls);
* GPU-only calls: ``torch.cuda.set_device/current_device/device_count/synchronize/memory_allocated`` and
  DeepSpeed's CUDA ``FusedAdam`` kernel (a torch AdamW takes its place; DeepSpeed's engine, ZeRO stage 2 and
  checkpointing run for real on DeepSpeed's CPU accelerator, over gloo).

``pyarrow.plasma`` is real (pyarrow 11), so oat's shared-memory transport between actor and learner runs as is.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STANDINS = str(Path(__file__).parent / "standins")

if importlib.util.find_spec("oat") is None:  # the workspace's main environment has no oat
    collect_ignore_glob = ["test_*.py"]
else:
    sys.path.insert(0, STANDINS)
    os.environ["PYTHONPATH"] = os.pathsep.join([STANDINS, os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import-time deprecation noise of oat's dependencies, not ours to fix
        import deepspeed  # noqa: F401
        import oat.algorithms.ppo_multiturn
        import oat.interface  # noqa: F401


class CPUAdam:
    """Stand-in for DeepSpeed's CUDA `FusedAdam` kernel: the same constructor, torch's AdamW underneath."""

    def __new__(
        cls, params: Any, lr: float = 1e-3, betas: Any = (0.9, 0.999), weight_decay: float = 0.0, **_: Any
    ) -> Any:
        import torch

        return torch.optim.AdamW(params, lr=lr, betas=tuple(betas), weight_decay=weight_decay)


@pytest.fixture(scope="session", autouse=True)
def cpu_only_cuda_calls() -> Iterator[None]:
    """Route oat's GPU-only calls to the CPU (see the module docstring)."""
    import oat.utils.deepspeed
    import torch

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.cuda, "set_device", lambda *a, **k: None)
        mp.setattr(torch.cuda, "current_device", lambda: "cpu")
        mp.setattr(torch.cuda, "device_count", lambda: 1)
        mp.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
        mp.setattr(torch.cuda, "memory_allocated", lambda *a, **k: 0)
        mp.setattr(torch.cuda, "empty_cache", lambda: None)
        mp.setattr(oat.utils.deepspeed, "FusedAdam", CPUAdam)
        yield


def build_tokenizer() -> Any:
    """A byte-level BPE tokenizer with a ChatML (Qwen2.5-style) template, trained on GymVerse text."""
    import gymverse
    from gymverse.testing import tiny_tokenizer

    env = gymverse.make("game:GuessTheNumber")
    corpus = [env.reset(seed=seed)[0] for seed in range(8)]
    corpus += [rf"I halve the range. \boxed{{{i}}} {i} is too low. Higher. too high. Lower." for i in range(64)]
    return tiny_tokenizer(corpus, "chatml", vocab_size=400)


@pytest.fixture(scope="session")
def base_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama and its tokenizer, saved like a Hub checkpoint (built here, nothing downloaded)."""
    from gymverse.testing import random_causal_lm

    tok = build_tokenizer()
    path = tmp_path_factory.mktemp("tiny-llama")
    random_causal_lm(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def policy_model(base_model_dir: Path) -> Any:
    """``policy_model(dest, policy)``: a copy of the tiny model whose vLLM stand-in plays `policy` (None: samples)."""

    def make(dest: Path, policy: str | None) -> Path:
        shutil.copytree(base_model_dir, dest)
        if policy is not None:
            (dest / "scripted_policy.txt").write_text(policy)
        return dest

    return make
