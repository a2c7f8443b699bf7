"""`Trainer`: one machine, one process — rollouts through the core pipeline, core advantages, a clipped PG update.

Per step:

1. torch's RNG is seeded from (seed, step) and each env gets ``prompts_per_env`` instance seeds drawn from the
   same key, each played by ``group_size`` episodes: a resumed run replays exactly what the original would.
2. `gymverse.rollout.RolloutCollector` runs every episode through `run_episode` with the model generating
   (`BatchedSampler`), the level and turn cap from the core `CurriculumState`, which it updates from the
   trajectories (evolution, horizon).
3. Advantages from the core estimators (`gymverse_train.advantages`; PERPO by default) fill ``Turn.advantage``.
4. `policy_update` takes one clipped policy-gradient step; metrics and trajectories are appended to ``out``.

Checkpoints (``out/checkpoint``, replaced atomically) hold the trainable weights, the optimizer, the curriculum
state and the config; `Trainer.resume` continues from one, dropping any records written after it.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymverse.failures import is_trained
from gymverse.rollout import InProcessSession, Renderer, RolloutCollector, episode_specs, renderer_for
from gymverse.trajectory import Trajectory, write_jsonl

from gymverse_train import advantages
from gymverse_train.config import TrainConfig
from gymverse_train.policy import add_lora, load_policy, load_trainable_state, trainable_state
from gymverse_train.sampler import BatchedSampler
from gymverse_train.update import Sample, UpdateConfig, policy_update

CHECKPOINT = "checkpoint"
METRICS = "metrics.jsonl"
TRAJECTORIES = "trajectories.jsonl"


def _stop_ids(renderer: Renderer, tokenizer: Any) -> set[int]:
    ids = set(getattr(renderer, "stop_ids", ()) or ())
    eos = getattr(tokenizer, "eos_token_id", None)
    ids |= set(eos if isinstance(eos, list) else [eos]) - {None}
    return {int(i) for i in ids}


def _peak_memory_mb() -> dict[str, float]:
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    import torch

    if torch.cuda.is_available():
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


class Trainer:
    """A single-machine PERPO/GRPO/ReBN/RLOO trainer over GymVerse envs (module docstring)."""

    def __init__(self, config: TrainConfig, out_dir: str | Path, *, model: Any = None, tokenizer: Any = None) -> None:
        import torch

        self.config = config
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        if config.threads:
            torch.set_num_threads(config.threads)
        if model is None:
            model, tokenizer = load_policy(config.model, device=config.device, dtype=config.dtype)
        elif tokenizer is None:
            raise ValueError("pass the tokenizer together with an already loaded model")
        if config.lora:
            model = add_lora(model, rank=config.lora_rank)
        self.model, self.tokenizer = model, tokenizer
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        self.renderer = renderer_for(tokenizer, system_prompt=config.system_prompt)
        self.sampler = BatchedSampler(
            model,
            tokenizer,
            stop_ids=_stop_ids(self.renderer, tokenizer),
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
        )
        self.curriculum = config.curriculum()
        self.collector = RolloutCollector(
            self.sampler,
            self.renderer,
            curriculum=self.curriculum,
            gamma=config.gamma,
            max_response_tokens=config.max_response_tokens,
            max_tokens_per_turn=config.max_new_tokens,
        )
        per_env = config.prompts_per_env * config.group_size
        self.sessions = [InProcessSession.make(e, complexity=config.level) for e in config.envs for _ in range(per_env)]
        self.step = 0
        self.update_config = UpdateConfig(
            clip=config.clip,
            epochs=config.epochs,
            minibatches=config.minibatches,
            micro_batch=config.micro_batch,
            max_grad_norm=config.max_grad_norm,
            temperature=config.temperature,
        )

    # ------------------------------------------------------------------ one step
    def _seeds(self) -> list[int]:
        """Step s plays rounds ``s*P .. s*P+P-1`` of the one row scheme (`gymverse.rollout.episode_specs`), so
        ``make-dataset --envs E --n N --seed S`` in any adapter lists the episodes this run plays first."""
        c = self.config
        specs = episode_specs(c.envs, c.prompts_per_env, seed=c.seed + self.step * c.prompts_per_env)
        by_env = {e: [s.seed for s in specs if s.env_id == e] for e in c.envs}
        return [int(seed or 0) for e in c.envs for seed in by_env[e] for _ in range(c.group_size)]

    def rollout(self) -> list[Trajectory]:
        """Play this step's episodes (updates the curriculum)."""
        import torch

        torch.manual_seed(int(np.random.default_rng([self.config.seed, self.step, 1]).integers(0, 2**62)))
        return self.collector.collect_sync(self.sessions, self._seeds())

    def train_step(self) -> dict[str, Any]:
        """Rollout, advantages, update; returns the step's metrics (also appended to ``metrics.jsonl``)."""
        started = time.perf_counter()
        self.sampler.stats.reset()
        levels_used = {e: self.curriculum.episode_config(e).complexity for e in self.config.envs}
        trajs = self.rollout()
        gen_s = time.perf_counter() - started
        report = self.collector.last_report
        usable = [t for t in trajs if t.tokens is not None and is_trained(t.stop_reason)]  # gymverse.failures
        token_adv = advantages.assign(usable, self.config.algo, gamma=self.config.gamma)
        samples = []
        for t, adv in zip(usable, token_adv):
            assert t.tokens is not None
            n_prompt = len(t.tokens.prompt_ids)
            ids = t.tokens.prompt_ids + t.tokens.response_ids
            samples.append(Sample(ids, [0.0] * n_prompt + adv.tolist(), [0] * n_prompt + t.tokens.response_mask))
        t0 = time.perf_counter()
        upd = policy_update(self.model, self.optimizer, samples, self.update_config)
        train_s = time.perf_counter() - t0
        self.step += 1
        for t in trajs:
            t.metrics["step"] = self.step
            t.metrics["algo"] = self.config.algo
        write_jsonl(trajs, self.out / TRAJECTORIES, append=True)
        metrics = self._metrics(trajs, usable, levels_used, report, gen_s, train_s, upd)
        metrics["step_s"] = time.perf_counter() - started
        with open(self.out / METRICS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(metrics) + "\n")
        if self.config.save_every and self.step % self.config.save_every == 0:
            self.save()
        return metrics

    def _metrics(
        self,
        trajs: list[Trajectory],
        usable: list[Trajectory],
        levels_used: dict[str, int | None],
        report: Any,
        gen_s: float,
        train_s: float,
        upd: dict[str, float],
    ) -> dict[str, Any]:
        by_env: dict[str, list[Trajectory]] = {}
        for t in trajs:
            by_env.setdefault(t.env_id, []).append(t)
        turn_adv = np.asarray([turn.advantage for t in usable for turn in t.turns if turn.advantage is not None])
        replies = [t.tokens.turn_ends[0] if t.tokens and t.tokens.turn_ends else 0 for t in trajs]
        turns = sum(len(t.turns) for t in trajs)
        return {
            "step": self.step,
            "episodes": len(trajs),
            "success": float(np.mean([t.success for t in trajs])),
            "success_by_env": {e: float(np.mean([t.success for t in ts])) for e, ts in by_env.items()},
            "return": float(np.mean([t.total_reward for t in trajs])),
            "return_by_env": {e: float(np.mean([t.total_reward for t in ts])) for e, ts in by_env.items()},
            "complexity_by_env": {e: float(np.mean([t.complexity for t in ts])) for e, ts in by_env.items()},
            "requested_level": levels_used,
            "levels": dict(report.levels) if report is not None else {},
            "level_changes": list(report.changes) if report is not None else [],
            "horizon": report.horizon if report is not None else None,
            "format_error_rate": sum(t.metrics.get("format_errors", 0) for t in trajs) / max(1, turns),
            "env_errors": sum(t.error is not None for t in trajs),
            "turns_mean": turns / max(1, len(trajs)),
            "first_reply_tokens_mean": float(np.mean(replies)),
            "adv_mean": float(turn_adv.mean()) if turn_adv.size else 0.0,
            "adv_std": float(turn_adv.std()) if turn_adv.size else 0.0,
            "adv_min": float(turn_adv.min()) if turn_adv.size else 0.0,
            "adv_max": float(turn_adv.max()) if turn_adv.size else 0.0,
            "gen_tokens": self.sampler.stats.tokens,
            "gen_s": gen_s,
            "generate_s": self.sampler.stats.seconds,  # inside the model's generate; gen_s - generate_s is ours
            "generate_calls": self.sampler.stats.calls,
            "tokens_per_s": self.sampler.stats.tokens / max(gen_s, 1e-9),
            "episodes_per_s": len(trajs) / max(gen_s, 1e-9),
            "train_s": train_s,
            **upd,
            "cpu_s": time.process_time(),  # process CPU time so far: comparable across loaded machines
            **_peak_memory_mb(),
        }

    def run(
        self,
        steps: int | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        *,
        time_limit_s: float | None = None,
    ) -> None:
        """Train until ``steps`` (default `config.steps`) steps are done in total or the time limit has passed
        (checked after each step), then checkpoint."""
        target = self.config.steps if steps is None else steps
        started = time.perf_counter()
        while self.step < target:
            m = self.train_step()
            if on_step is not None:
                on_step(m)
            if time_limit_s is not None and time.perf_counter() - started >= time_limit_s:
                break
        self.save()

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        """Write ``out/checkpoint`` atomically (trainable weights, optimizer, curriculum, config, step)."""
        import torch

        final = self.out / CHECKPOINT
        tmp = self.out / f".{CHECKPOINT}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save(trainable_state(self.model), tmp / "policy.pt")
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        state = {"step": self.step, "config": self.config.to_dict(), "curriculum": self.curriculum.state_dict()}
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
        old = self.out / f".{CHECKPOINT}.old"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        return final

    @classmethod
    def resume(
        cls, out_dir: str | Path, *, steps: int | None = None, model: Any = None, tokenizer: Any = None
    ) -> Trainer:
        """Continue the run in `out_dir` from its checkpoint (``steps`` may extend it)."""
        import torch

        ckpt = Path(out_dir) / CHECKPOINT
        if not (ckpt / "state.json").is_file():
            raise FileNotFoundError(f"{ckpt}: no checkpoint to resume from")
        state = json.loads((ckpt / "state.json").read_text())
        config = TrainConfig.from_dict(state["config"])
        if steps is not None:
            config.steps = steps
        trainer = cls(config, out_dir, model=model, tokenizer=tokenizer)
        load_trainable_state(trainer.model, torch.load(ckpt / "policy.pt", weights_only=True))
        trainer.optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", weights_only=True))
        trainer.curriculum.load_state_dict(state["curriculum"])
        trainer.step = int(state["step"])
        trainer._truncate_records()
        return trainer

    def _truncate_records(self) -> None:
        """Drop records of steps after the checkpoint (a run that died after it wrote them)."""
        for name, key in ((METRICS, lambda d: d["step"]), (TRAJECTORIES, lambda d: d["metrics"].get("step", 0))):
            path = self.out / name
            if not path.is_file():
                continue
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            kept = [ln for ln in lines if ln.strip() and key(json.loads(ln)) <= self.step]
            if len(kept) != len(lines):
                path.write_text("".join(kept), encoding="utf-8")
