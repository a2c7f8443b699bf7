"""OpenRLHF's real launcher on CPU: ``python -m gymverse_openrlhf.train <train_ppo_ray flags> --gymverse.*``.

Two runs of the launcher in a subprocess (its own Ray cluster each): two rollout batches with a checkpoint per
step, then ``--ckpt.load_enable`` for exactly two new batches. Everything is OpenRLHF 0.11.2's own code
(``train_ppo_ray`` main and ``train``, `PPOTrainer` in its Ray actor, `SamplesGenerator`, `RolloutRayActor` and
its agent executor, `RemoteExperienceMaker`, `Experience`, `RayActorGroup`, `Actor`, `PolicyLoss`, checkpoint
states and dataloader resume) plus the adapter, except these cuts (``tests/launcher_harness``, loaded in every
process through ``sitecustomize``):

- vLLM's engine is the scripted stand-in of ``tests/gpu_stand_ins/vllm`` (a GuessTheNumber policy);
  OpenRLHF's `RolloutRayActor` runs around it.
- `PolicyModelActor` (DeepSpeed/CUDA/NCCL) is the CPU policy worker ``launcher_harness/cpu_policy_actor.py``:
  OpenRLHF's `Actor` and `PolicyLoss`, one AdamW step per experience; not `ActorPPOTrainer`'s epochs,
  micro-batches, clipping or LR schedule, nor DeepSpeed's checkpoint format.
- flash-attn's Triton cross-entropy fails to import, so OpenRLHF's own fallback computes the log-probs.
- Ray runs on 2 CPUs with 1 logical GPU (``--train.colocate_all``, so OpenRLHF's placement groups schedule).

Not run, by the run's design: OpenRLHF's ``compute_advantages_and_returns`` / ``compute_reward`` /
``get_cumulative_returns`` (replaced by GymVerse's per-turn PERPO, ``--gymverse.norm env``), and the reference
model, KL and critic (``--algo.kl.init_coef 0`` with the critic-free ``reinforce`` estimator).
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
HARNESS = HERE / "launcher_harness"
STAND_INS = HERE / "gpu_stand_ins"
sys.path.insert(0, str(HARNESS))
from cpu_run_harness import HARNESS_VAR, RAY_TMP_VAR, TRACE_VAR  # noqa: E402

ENV = "game:GuessTheNumber"
GAMMA = 0.9
RUN_MARKER = "GYMVERSE_OPENRLHF_TEST_RUN"  # in every process of a run (inherited), to find leftovers by pid

pytestmark = pytest.mark.timeout(900)


def build_model(tokenizer: Any, path: Path) -> Path:
    """A tiny random Llama with the test tokenizer (ChatML template) saved as an HF checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def launcher_flags(model: Path, data: Path, ckpt: Path) -> list[str]:
    """OpenRLHF ``train_ppo_ray`` flags for a two-batch run on one (logical) GPU, plus the GymVerse flags."""
    return [
        *("--actor.model_name_or_path", str(model)),
        *("--data.prompt_dataset", str(data), "--data.input_key", "prompt", "--data.label_key", "label"),
        "--data.apply_chat_template",
        *("--data.max_len", "1024", "--rollout.max_new_tokens", "32"),
        *("--algo.advantage.estimator", "reinforce", "--algo.advantage.gamma", str(GAMMA)),
        *("--algo.kl.init_coef", "0"),
        *("--vllm.num_engines", "1", "--vllm.tensor_parallel_size", "1", "--train.colocate_all"),
        *("--actor.num_nodes", "1", "--actor.num_gpus_per_node", "1"),
        *("--ref.num_gpus_per_node", "1", "--critic.num_gpus_per_node", "1", "--reward.num_gpus_per_node", "1"),
        *("--rollout.batch_size", "2", "--rollout.n_samples_per_prompt", "2", "--rollout.micro_batch_size", "2"),
        *("--train.batch_size", "4", "--train.micro_batch_size", "2", "--train.seed", "0"),
        *("--ds.attn_implementation", "eager", "--actor.adam.lr", "1e-3"),
        *("--ckpt.path", str(ckpt / "checkpoints"), "--ckpt.output_dir", str(ckpt / "final")),
        *("--ckpt.save_steps", "1"),
        *("--gymverse.norm", "env", "--gymverse.evolve", "--gymverse.promote_at", "0.75", "--gymverse.patience", "1"),
    ]


def _pids_of_run(marker: str) -> list[int]:
    """Processes whose environment carries this run's marker (the launcher, Ray's daemons and workers)."""
    needle = f"{RUN_MARKER}={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def _kill_run(marker: str) -> None:
    for pid in _pids_of_run(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_launcher(flags: list[str], trace: Path, log: Path, ray_tmp: str, marker: str) -> None:
    """``python -m gymverse_openrlhf.train`` under the CPU harness; fails with the log's tail if it fails."""
    trace.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(STAND_INS), str(HARNESS)]),
            HARNESS_VAR: "1",
            TRACE_VAR: str(trace),
            RAY_TMP_VAR: ray_tmp,
            RUN_MARKER: marker,
            "HF_HOME": str(trace.parent / "hf"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "PYTHONWARNINGS": "ignore",
        }
    )
    with open(log, "w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "gymverse_openrlhf.train", *flags],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            start_new_session=True,
        )
    if proc.returncode != 0:
        tail = log.read_text()[-6000:]
        raise AssertionError(f"launcher exited with {proc.returncode}; log tail:\n{tail}")


def read_trace(trace: Path) -> list[tuple[str, int, float]]:
    """Every traced call: (module.qualname, pid, time)."""
    rows = []
    for path in glob.glob(str(trace / "trace-*.txt")):
        for line in Path(path).read_text().splitlines():
            name, pid, when = line.split()
            rows.append((name, int(pid), float(when)))
    return sorted(rows, key=lambda r: r[2])


def read_batches(trace: Path) -> list[list[dict[str, Any]]]:
    """The saved experiences of every rollout batch, in time order."""
    import torch

    saved = [torch.load(p, weights_only=False) for p in glob.glob(str(trace / "experiences-*.pt"))]
    return [s["experiences"] for s in sorted(saved, key=lambda s: s["time"])]


@pytest.fixture
def run_marker() -> Iterator[str]:
    marker = uuid.uuid4().hex
    yield marker
    _kill_run(marker)


def test_real_launcher_two_batches_checkpoint_and_resume(tokenizer: Any, tmp_path: Path, run_marker: str) -> None:
    from gymverse_openrlhf.cli import make_dataset

    model = build_model(tokenizer, tmp_path / "model")
    data = tmp_path / "prompts.jsonl"
    make_dataset([ENV], 4, str(data))
    ckpt = tmp_path / "ckpt"
    ray_tmp = tempfile.mkdtemp(prefix="gvray-", dir="/tmp")
    flags = launcher_flags(model, data, ckpt)
    t0 = time.time()
    run_launcher(flags, tmp_path / "trace1", tmp_path / "run1.log", ray_tmp, run_marker)
    print("run 1", time.time() - t0)
    trace = read_trace(tmp_path / "trace1")
    print(sorted({n for n, _, _ in trace}))
    print({p for _, p, _ in trace})
    batches = read_batches(tmp_path / "trace1")
    print(len(batches), [[e["info"] for e in b] for b in batches])
