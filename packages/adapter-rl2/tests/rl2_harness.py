"""Test helpers for the RL2 adapter: a Qwen3 tokenizer, RL2's composed config, a call tracer, child cleanup."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import types
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
    from gymverse_rl2.train import rl2_config as compose

    return compose(overrides)


def cpu_rollout(config: Any, tokenizer: Any, mp: Any) -> Any:
    """RL2 0.0.2's `Rollout` without its SGLang server and router processes (GPU engine): RL2's own `__call__`,
    device mesh, filtering and packing; the engine's memory-release request is a no-op."""
    from omegaconf import OmegaConf
    from RL2.workers import rollout as rollout_module

    mp.setattr(rollout_module, "make_request", lambda *args, **kwargs: None)
    rollout = rollout_module.Rollout.__new__(rollout_module.Rollout)
    rollout.config = config.rollout
    rollout.prepare_device_mesh()
    rollout.tokenizer = tokenizer
    rollout.router_url = rollout.worker_url = "http://sglang-engine.invalid"
    rollout.train_sampling_params = OmegaConf.to_container(config.rollout.train_sampling_params, resolve=True)
    rollout.test_sampling_params = OmegaConf.to_container(config.rollout.test_sampling_params, resolve=True)
    return rollout


def sglang_reply(ids: list[int], finish: str = "stop", **meta: Any) -> dict[str, Any]:
    """An SGLang ``/generate`` response (``return_logprob=True``) carrying `ids`."""
    logprobs = [[-0.5, i, None] for i in ids]
    info = {"output_token_logprobs": logprobs, "finish_reason": {"type": finish}, "completion_tokens": len(ids)}
    return {"text": "", "meta_info": {**info, **meta}}


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


def cpu_actor(config: Any, mp: Any, vocab: int = 512) -> Any:
    """RL2 0.0.2's `Actor` with its real update path (minibatching by ``max_length_per_device``, PPO loss,
    optimizer step) on CPU: the flash-attention HF model is a tiny embedding LM, CUDA placement is the CPU and
    FSDP's parameter offloading is a no-op."""
    import RL2.utils.offloading as offloading
    import torch
    from RL2.workers.actor import Actor
    from torch.distributed.device_mesh import init_device_mesh

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, 8)
            self.head = torch.nn.Linear(8, vocab)
            self.calls: list[int] = []  # tokens per forward (one per minibatch)

        def forward(self, input_ids: Any, position_ids: Any, use_cache: bool = False) -> Any:
            self.calls.append(int(input_ids.numel()))
            return types.SimpleNamespace(logits=self.head(self.emb(input_ids)))

    mp.setattr(torch.cuda, "current_device", lambda: "cpu")
    mp.setattr(offloading, "load_model_to_device", lambda worker, device: None)
    actor = Actor.__new__(Actor)
    actor.config, actor.train, actor.dp_size = config.actor, True, 1
    shape = (1, int(config.actor.sp_size), int(config.actor.tp_size))
    actor.device_mesh = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "sp", "tp"))
    actor.model = Tiny()
    actor.optimizer = torch.optim.AdamW(actor.model.parameters(), lr=1e-2)
    actor.scheduler = torch.optim.lr_scheduler.LambdaLR(actor.optimizer, lambda step: 1.0)
    return actor
