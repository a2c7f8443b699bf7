"""RL2 (rl-square 0.0.2): GymVerse's rollout and PERPO advantage step against RL2's own, in RL2's environment.

    .venv-rl2/bin/python benchmarks/frameworks/bench_rl2.py [--quick] [--gpu] [--rounds N]

**Rollout overhead.** Both arms run RL2's ``Rollout.__call__(data_list, train=True, step)`` (its asyncio gather over
the batch, metrics, packing into ``(tensor_dict, cu_seqs)``) on the same dataset rows with the same zero-cost
engine: RL2's ``async_generate`` answers instantly with a fixed reply in SGLang's ``/generate`` response format.

* ``rl2_native``: RL2's own turn loop (``Rollout.rollout``: env ``reset``/``step`` over text, re-tokenizing each
  env turn) with `rl2_native_env` (RL2's env-file contract over the same GymVerse envs);
* ``gymverse``: the adapter installed as its launcher installs it (`gymverse_rl2.patch.install`):
  ``Rollout.rollout`` plays each episode through the core runner (pool session, chat template renderer).

**Advantage step.** RL2's ``compute_advantages`` (reinforce with per-prompt normalization: GRPO) against the same
function with ``gymverse.perpo=true`` installed (RL2's estimator, then env-level PERPO on the batch), on RL2-shaped
batches of 4k and 64k transitions (model turns).

``--gpu`` replaces the scripted engine with a randomly initialised Qwen2-0.5B-shaped model generating with
transformers on CUDA (skipped with a message where CUDA is absent). Writes ``results/frameworks/rl2.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1] / "packages" / "adapter-rl2" / "tests"
# RL2 imports SGLang and flash-attn at module level: the adapter tests' GPU stand-ins take their place (never run).
sys.path[:0] = [str(HERE), str(TESTS / "gpu_stand_ins"), str(TESTS)]

import torch  # noqa: E402
from common import (  # noqa: E402
    Target,
    base_parser,
    interleaved,
    progress,
    rounds_of,
)
from scripted import (  # noqa: E402
    Clock,
    adv_targets,
    case_rows,
    concurrency_of,
    envs_of,
    episodes_per_sample,
    gpu_model,
    reply_ids,
    report,
    turn_targets,
)

PACKAGES = ("rl-square", "gymverse-adapter-rl2", "torch", "transformers")


def start_process_group() -> None:
    """The one-process gloo group and disabled wandb that RL2's rank-0 code expects (as torchrun would set up)."""
    import torch.distributed as dist
    import wandb

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(
        {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    )
    os.environ.update({"WANDB_MODE": "disabled", "WANDB_SILENT": "true"})
    dist.init_process_group("gloo", rank=0, world_size=1)
    wandb.init(mode="disabled")


class ScriptedEngine:
    """RL2's ``async_generate(url, states, sampling_params)`` answered at once with SGLang's response format."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.calls = 0
        self.ids: list[int] = []
        self.text = ""

    def use(self, env_id: str) -> None:
        """Reply with `env_id`'s fixed reply from now on."""
        self.ids = reply_ids(self.tokenizer, env_id)
        self.text = str(self.tokenizer.decode(self.ids, skip_special_tokens=True))

    async def __call__(self, url: str, states: list[int], sampling_params: Mapping[str, Any]) -> dict[str, Any]:
        self.calls += 1
        await asyncio.sleep(0)  # a real engine's reply arrives through the event loop
        meta = {
            "finish_reason": {"type": "stop", "matched": self.ids[-1]},
            "prompt_tokens": len(states),
            "completion_tokens": len(self.ids),
            "cached_tokens": 0,
            "output_token_logprobs": [[-0.1, i, None] for i in self.ids],
        }
        return {"text": self.text, "meta_info": meta}


class TransformersEngine(ScriptedEngine):
    """``--gpu``: the same call generating with a real (randomly initialised, Qwen2-0.5B-shaped) model on CUDA."""

    def __init__(self, tokenizer: Any, max_new_tokens: int = 32) -> None:
        super().__init__(tokenizer)
        self.model = gpu_model(tokenizer)
        self.max_new_tokens = max_new_tokens
        self.lock = asyncio.Lock()

    async def __call__(self, url: str, states: list[int], sampling_params: Mapping[str, Any]) -> dict[str, Any]:
        self.calls += 1
        async with self.lock:  # one request at a time on the one model
            ids = await asyncio.to_thread(self._generate, states)
        text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
        meta = {
            "finish_reason": {"type": "length"},
            "prompt_tokens": len(states),
            "completion_tokens": len(ids),
            "output_token_logprobs": [[-0.1, i, None] for i in ids],
        }
        return {"text": text, "meta_info": meta}

    @torch.no_grad()
    def _generate(self, states: list[int]) -> list[int]:
        out = self.model.generate(
            torch.tensor([states], device="cuda"), max_new_tokens=self.max_new_tokens, do_sample=True
        )
        return [int(i) for i in out[0, len(states) :]]


def make_rollout(tokenizer_dir: Path, env_path: str, max_turns: int) -> Any:
    """RL2's `Rollout` on rank 0 as its ``__init__`` builds it, minus launching the (GPU) SGLang server/router."""
    from omegaconf import OmegaConf
    from RL2.workers.rollout import Rollout
    from rl2_harness import rl2_config
    from transformers import AutoTokenizer

    config = rl2_config(
        [
            f"actor.model_name={tokenizer_dir}",
            f"rollout.env_path={env_path}",
            f"rollout.max_turns={max_turns}",
            "rollout.dynamic_filtering=false",
            "rollout.train_sampling_params.max_new_tokens=64",
        ]
    )
    rollout = Rollout.__new__(Rollout)
    rollout.config = config.rollout
    rollout.prepare_device_mesh()
    rollout.prepare_environment()
    rollout.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rollout.router_url = rollout.worker_url = "http://scripted-engine"
    rollout.train_sampling_params = OmegaConf.to_container(config.rollout.train_sampling_params)
    rollout.test_sampling_params = OmegaConf.to_container(config.rollout.test_sampling_params)
    return rollout


def rollout_section(
    args: Any, tokenizer_dir: Path, engine_cls: Callable[[Any], ScriptedEngine]
) -> list[dict[str, Any]]:
    """Episodes/s and ms per turn of both arms for each env and concurrency."""
    import RL2.utils.sglang
    import RL2.workers.rollout as rl2_rollout
    from gymverse_rl2.patch import install, uninstall
    from gymverse_rl2.settings import Settings
    from gymverse_rl2.train import env_path

    max_turns = 10  # the envs' own budget at level 1; RL2's loop needs it as rollout.max_turns
    rollouts = {
        "rl2_native": make_rollout(tokenizer_dir, str(HERE / "rl2_native_env.py"), max_turns),
        "gymverse": make_rollout(tokenizer_dir, env_path(), max_turns),
    }
    engine = engine_cls(rollouts["gymverse"].tokenizer)
    # the engine (SGLang, GPU) is the one replaced part: generation and its memory-release call
    RL2.utils.sglang.async_generate = rl2_rollout.async_generate = engine  # type: ignore[assignment]
    rl2_rollout.make_request = lambda *a, **k: None
    step = [0]

    def arm(name: str, env_id: str, n: int) -> Callable[[], dict[str, float]]:
        rows = [{"extra_info": {"env_id": env_id, "seed": 1000 + i}} for i in range(n)]
        reps = max(1, episodes_per_sample(args.quick) // n)  # small batches are repeated

        def run() -> dict[str, float]:
            if name == "gymverse":
                install(Settings())
            engine.use(env_id)
            engine.calls = 0
            batches = [copy.deepcopy(rows) for _ in range(reps)]  # RL2 writes into each row's extra_info
            sink = io.StringIO()  # RL2 prints a metrics line and a progress bar per call
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    clock = Clock()
                    for batch in batches:
                        step[0] += 1
                        rollouts[name](batch, True, step[0])
                    total_ms = clock.ms()
            finally:
                uninstall()
            turns = engine.calls
            return {
                "episodes_per_s": 1000 * n * reps / total_ms[0],
                "ms_per_turn": total_ms[0] / turns,
                "cpu_ms_per_turn": total_ms[1] / turns,
                "turns_per_episode": turns / (n * reps),
            }

        return run

    rows_out = []
    for env_id in envs_of(args.quick):
        for n in concurrency_of(args.quick):
            arms = {name: arm(name, env_id, n) for name in rollouts}
            res = interleaved(arms, rounds_of(args), f"rl2 rollout {env_id} x{n}")
            rows_out += case_rows(
                "rl2", f"rollout {env_id} x{n}", res, "ms_per_turn", "rl2_native", env=env_id, concurrency=n
            )
    return rows_out


def adv_batch(
    n_traj: int, seq_len: int = 512, seed: int = 0
) -> tuple[dict[str, torch.Tensor], torch.Tensor, list[Any]]:
    """An RL2 rollout batch: one sequence per trajectory, 4 model turns of 64 tokens between env turns of 32,
    and each trajectory's `EpisodeRecord` (what the adapter's rollout hook leaves pending for the batch)."""
    from gymverse.rollout import EpisodeRecord

    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(n_traj, seq_len, dtype=torch.long)
    rewards = torch.zeros(n_traj, seq_len)
    start = 64
    for _ in range(4):
        mask[:, start : start + 64] = 1
        rewards[:, start + 63] = torch.randint(0, 2, (n_traj,), generator=g).float()
        start += 64 + 32
    td = {
        "states": torch.randint(1, 1000, (n_traj, seq_len), generator=g),
        "actions": torch.randint(1, 1000, (n_traj, seq_len), generator=g) * mask,
        "action_mask": mask,
        "rewards": rewards,
        "eos_mask": torch.zeros(n_traj, seq_len, dtype=torch.long),
        "position_ids": torch.arange(seq_len).repeat(n_traj, 1),
        "llm_logps": -torch.rand(n_traj, seq_len, generator=g),
    }
    ends = (64, 128, 192, 256)  # cumulative action tokens at each turn's end
    turn_rewards = rewards[:, mask[0].bool()].reshape(n_traj, 4, 64)[:, :, -1].tolist()
    records = [  # 8 responses per prompt, 4 envs
        EpisodeRecord(f"game:Env{(i // 8) % 4}", tuple(r), ends, episode_id=f"e{i}") for i, r in enumerate(turn_rewards)
    ]
    return td, torch.arange(n_traj + 1), records


def advantage_section(args: Any, tokenizer_dir: Path) -> list[dict[str, Any]]:
    """RL2's GRPO ``compute_advantages`` vs the same call with GymVerse PERPO installed, at 4k and 64k turns."""
    import RL2.utils.algorithms as algorithms
    from gymverse_rl2.patch import install, perpo_advantages, uninstall
    from gymverse_rl2.settings import Settings, current
    from rl2_harness import rl2_config

    config = rl2_config(
        [f"actor.model_name={tokenizer_dir}", "train_data.responses_per_prompt=8", "adv.norm_var=true"]
    ).adv
    install(Settings(perpo=True))
    hook = algorithms.compute_advantages
    native = hook.__gymverse_original__
    rows = []
    sizes = (4096,) if args.quick else (4096, 65536)
    try:
        for transitions in sizes:
            td, cu, records = adv_batch(transitions // 4)
            sink = io.StringIO()

            def rl2_grpo(td: dict[str, torch.Tensor] = td, cu: torch.Tensor = cu) -> dict[str, float]:
                batch = {k: v.clone() for k, v in td.items()}
                clock = Clock()
                native(config, batch, cu, 1)
                wall, cpu = clock.ms()
                return {"ms": wall, "cpu_ms": cpu}

            def gymverse_perpo(
                td: dict[str, torch.Tensor] = td, cu: torch.Tensor = cu, records: list[Any] = records
            ) -> dict[str, float]:
                batch = {k: v.clone() for k, v in td.items()}
                current().pending = list(records)  # what the rollout hook leaves for this batch
                clock = Clock()
                hook(config, batch, cu, 1)
                wall, cpu = clock.ms()
                return {"ms": wall, "cpu_ms": cpu}

            def perpo_only(
                td: dict[str, torch.Tensor] = td, cu: torch.Tensor = cu, records: list[Any] = records
            ) -> dict[str, float]:
                clock = Clock()
                perpo_advantages(td, cu, records)
                wall, cpu = clock.ms()
                return {"ms": wall, "cpu_ms": cpu}

            arms = {"rl2_grpo": rl2_grpo, "gymverse_perpo_hook": gymverse_perpo, "perpo_only": perpo_only}
            with contextlib.redirect_stdout(sink):  # RL2's time_logger prints nothing, wandb is disabled
                for warm_up in arms.values():  # first calls (lazy imports, allocator growth) are not measured
                    warm_up()
                res = interleaved(
                    arms,
                    rounds_of(args),
                    f"rl2 advantages {transitions}",
                )
            fields = {"transitions": transitions, "trajectories": transitions // 4, "tokens": int(td["states"].numel())}
            rows += case_rows("rl2", f"advantages {transitions // 1024}k turns", res, "ms", "rl2_grpo", **fields)
            del td
    finally:
        uninstall()
    return rows


def targets(rollout_rows: list[dict[str, Any]], adv_rows: list[dict[str, Any]]) -> list[Target]:
    """The issue's targets, judged on this run's medians."""
    note = "compute_advantages with gymverse.perpo=true (RL2's estimator, then PERPO) vs without"
    return [
        *turn_targets("rl2", rollout_rows, "rl2_native", "RL2 native"),
        *adv_targets("rl2", adv_rows, "x RL2 GRPO", note),
    ]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rollout-only", action="store_true", help="skip the advantage section")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from rl2_harness import build_tokenizer

    start_process_group()
    engines: dict[str, Callable[[Any], ScriptedEngine]] = {"scripted": ScriptedEngine}
    if args.gpu:
        if torch.cuda.is_available():
            engines["transformers_gpu"] = TransformersEngine
        else:
            progress("--gpu: no CUDA device here; the GPU section is skipped")
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer_dir = build_tokenizer(Path(tmp))
        rollout_rows = rollout_section(args, tokenizer_dir, engines["scripted"])
        gpu_rows = []
        if "transformers_gpu" in engines:
            gpu_rows = rollout_section(args, tokenizer_dir, engines["transformers_gpu"])
            for r in gpu_rows:
                r["case"] = f"gpu {r['case']}"
        adv_rows = [] if args.rollout_only else advantage_section(args, tokenizer_dir)
    report(
        "rl2",
        "RL2",
        {"rollout": rollout_rows, "gpu": gpu_rows, "advantages": adv_rows},
        ["case", "arm", "trajectories", "tokens", "ms", "cpu_ms", "ratio_vs_native", "wall_ratio_vs_native"],
        targets(rollout_rows, adv_rows),
        args=args,
        packages=PACKAGES,
    )
    import torch.distributed as dist

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
