"""Trainer throughput through the batch boundary on a GPU: `gymverse train`'s loop, one machine, real generation.

A randomly initialised Qwen2 model (sizes below; nothing downloaded) with a byte-level BPE tokenizer carrying the
real Qwen3 chat template plays GymVerse episodes through `run_episode` (HF ``generate`` batched by the trainer's
sampler), the step's episodes cross the batch boundary (`EpisodeBatch` -> `gymverse.perpo.advantages`, void
episodes dropped by the failure policy) and one policy update runs. Prints one row per step (rollout, PERPO,
update, tokens/s, peak GPU memory) and writes ``benchmarks/results/train_gpu.json``. Timings are a measurement,
never a test::

    python benchmarks/train_gpu.py --device cuda --steps 4      # on a GPU machine
    uv run python benchmarks/train_gpu.py --device cpu --steps 2 --hidden 128 --layers 2   # a CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def build_policy(hidden: int, layers: int, device: str) -> tuple[Any, Any, int]:
    """(model, tokenizer, parameter count): random Qwen2 over a BPE tokenizer with Qwen3's chat template."""
    import torch
    from gymverse.registry import make
    from gymverse.testing import random_causal_lm, tiny_tokenizer

    corpus = []
    for env_id in ("game:GuessTheNumber", "logic:LatinSquare"):
        for seed in range(8):
            corpus.append(make(env_id).reset(seed=seed)[0])
    corpus += [r"\boxed{" + str(i) + "}" for i in range(100)]
    tok = tiny_tokenizer(corpus, "qwen3", vocab_size=2048)
    model = random_causal_lm(
        tok,
        arch="qwen2",
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        num_key_value_heads=max(1, hidden // 64),
    ).to(device=device, dtype=torch.bfloat16 if device.startswith("cuda") else torch.float32)
    return model, tok, sum(p.numel() for p in model.parameters())


def main() -> int:
    """Run the steps, print the table, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--prompts", type=int, default=8, help="instances per env per step")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--out", default=str(RESULTS / "train_gpu.json"))
    args = p.parse_args()

    import torch
    from gymverse_train.config import TrainConfig
    from gymverse_train.trainer import Trainer
    from train_peers import Recorder, rollout_peer, update_peer

    model, tok, params = build_policy(args.hidden, args.layers, args.device)
    cfg = TrainConfig(
        model="random-qwen2",
        envs=["game:GuessTheNumber", "logic:LatinSquare"],
        steps=args.steps,
        evolve=True,
        prompts_per_env=args.prompts,
        group_size=args.group_size,
        max_turns=4,
        max_new_tokens=32,
        lr=1e-5,
        micro_batch=16,
        device=args.device,
        dtype="bfloat16" if args.device.startswith("cuda") else "float32",
        save_every=0,
    )
    rows = []
    recorder = Recorder()
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(cfg, out, model=model, tokenizer=tok)
        recorder.attach(trainer)
        for step in range(args.steps):
            recorder.new_step()
            t0 = time.perf_counter()
            m = trainer.train_step()
            rows.append(
                {
                    "step": step + 1,
                    "episodes": m["episodes"],
                    "rollout_s": round(m["gen_s"], 3),
                    # the model's own generate calls, and what the rest of the rollout (envs, rendering, PERPO's
                    # bookkeeping, the sampler's batching) cost per batched turn next to one generate call
                    "generate_s": round(m["generate_s"], 3),
                    "generate_calls": m["generate_calls"],
                    "layer_ms_per_call": round(1000 * (m["gen_s"] - m["generate_s"]) / max(1, m["generate_calls"]), 1),
                    "update_s": round(m["train_s"], 3),
                    "step_s": round(time.perf_counter() - t0, 3),
                    "tokens_per_s": round(m.get("tokens_per_s", 0.0), 1),
                    "env_errors": m.get("env_errors", 0),
                    "peak_gpu_mb": m.get("peak_gpu_mb"),
                }
            )
            r = rows[-1]
            print(
                f"step {r['step']}: {r['episodes']} episodes, rollout {r['rollout_s']} s (generate {r['generate_s']} s "
                f"in {r['generate_calls']} calls, {r['layer_ms_per_call']} ms of GymVerse per call), update "
                f"{r['update_s']} s, {r['tokens_per_s']} tok/s, peak GPU {r['peak_gpu_mb']} MB",
                flush=True,
            )
        # the peers redo the last step's work: its sampler batches through plain generate, its samples through a
        # plain loss/backward/step (`train_peers.py`)
        gen_peer = rollout_peer(model, trainer.sampler, recorder.batches)
        upd_peer = update_peer(model, recorder.samples, cfg.micro_batch, cfg.lr, cfg.temperature)
    last = rows[-1]
    peers = {
        "rollout_tokens_per_s": round(last["tokens_per_s"], 1),
        "plain_generate_tokens_per_s": round(gen_peer["tokens_per_s"], 1),
        "rollout_ratio": round(gen_peer["tokens_per_s"] / max(last["tokens_per_s"], 1e-9), 3),
        "update_s": last["update_s"],
        "plain_update_s": round(upd_peer["seconds"], 3),
        "update_ratio": round(last["update_s"] / max(upd_peer["seconds"], 1e-9), 3),
    }
    print(
        f"last step vs plain transformers: rollout {peers['rollout_tokens_per_s']} tok/s vs plain generate "
        f"{peers['plain_generate_tokens_per_s']} tok/s (x{peers['rollout_ratio']} slower, target <= 1.5); update "
        f"{peers['update_s']} s vs plain loss/backward/step {peers['plain_update_s']} s (x{peers['update_ratio']}, "
        "target <= 1.5)",
        flush=True,
    )
    steady = rows[1:] or rows
    summary = {
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor(),
        "torch": torch.__version__,
        "params_m": round(params / 1e6, 1),
        "load_avg_1m": os.getloadavg()[0],  # the machine may be shared: figures say how busy it was
        "median_step_s": statistics.median(r["step_s"] for r in steady),
        "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
        "peers": peers,
        "steps": rows,
        "config": {k: getattr(args, k) for k in ("steps", "hidden", "layers", "prompts", "group_size", "device")},
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "steps"}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
