"""GymVerse in RL2's hooks: ``Rollout.__call__`` (validation flag, curriculum step, the batch's records), 0.0.2's
``Rollout.rollout``; PERPO: ``compute_advantages`` (off: RL2's bit for bit); curriculum: checkpoint save/load (the
core's file in ``step<N>``, written right after RL2's folder: no "latest" marker, so a crash in between fails)."""

from __future__ import annotations

import dataclasses
import functools
import glob
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from gymverse.curriculum.service import load_checkpoint, save_checkpoint
from gymverse.perpo import DEFAULT_EPS, advantages, turn_ends_from_mask
from gymverse.rollout import EpisodeBatch, EpisodeRecord

from gymverse_rl2 import episodes
from gymverse_rl2.settings import RECORD_TAG, Runtime, Settings, configure, current, training

_installed: list[tuple[Any, str, Any]] = []


def _set(owner: Any, name: str, value: Any) -> None:
    _installed.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)))
    setattr(owner, name, value)


def uninstall() -> None:
    """Restore every wrapped RL2 function (tests; a training process never needs it)."""
    while _installed:
        owner, name, original = _installed.pop()
        setattr(owner, name, original)


def _after_rollout(out: Any, train: bool, step: int) -> Any:
    rt = current()
    if dist.get_rank() != 0:
        return out
    if train:
        from RL2.utils.logging import gather_and_log

        report = rt.curriculum.end_step()
        stats = {f"gymverse/level/{e}": [float(v)] for e, v in report.levels.items()}
        stats.update({f"gymverse/success/{e}": [v] for e, v in report.success.items()})
        if stats:
            gather_and_log(stats, step)
    if isinstance(out, tuple) and isinstance(out[0], dict) and RECORD_TAG in out[0]:  # 0.0.2 and head, rank 0
        keys = out[0].pop(RECORD_TAG)
        rt.pending = [rt.records[int(keys[int(a), 0])] for a in out[1][:-1]]
    rt.records.clear()
    return out


def _wrap_call(original: Callable[..., Any], is_legacy: bool) -> Callable[..., Any]:
    """0.0.2: ``__call__(self, data_list, train, step)``; head: ``async __call__(self, train, step)``."""

    @functools.wraps(original)
    def call(self: Any, *args: Any) -> Any:
        train, step = args[-2:]
        token = training.set(bool(train))
        if not is_legacy:
            return _acall(original(self, *args), token, train, step)
        try:
            return _after_rollout(original(self, *args), train, step)
        finally:
            training.reset(token)

    return call


async def _acall(rollout: Any, token: Any, train: bool, step: int) -> Any:
    try:
        return _after_rollout(await rollout, train, step)
    finally:
        training.reset(token)


def _wrap_tensor_dicts(original: Callable[..., Any]) -> Callable[..., Any]:
    """Head: tag each sequence of `SampleGroup.to_all_tensor_dicts_and_metrics` with its episode record."""

    @functools.wraps(original)
    def to_all_tensor_dicts_and_metrics(self: Any) -> Any:
        all_tensor_dicts, metrics = original(self)
        for sample, tensor_dicts in zip(self.samples, all_tensor_dicts):
            key = current().add(EpisodeRecord.from_dict(sample.sample["gymverse"]))
            for td in tensor_dicts:
                td[RECORD_TAG] = torch.full_like(td["states"], key)
        return all_tensor_dicts, metrics

    return to_all_tensor_dicts_and_metrics


def perpo_advantages(  # RL2 shifts tokens by one and may split a trajectory over rows: rows laid end to end
    tensor_dict: dict[str, torch.Tensor],
    cu_seqs: Any,
    records: Sequence[EpisodeRecord],
    *,
    gamma: float = 1.0,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Advantages shaped like ``tensor_dict["action_mask"]`` (float32, 0 off action tokens and in void rows)."""
    bounds = list(itertools.pairwise(int(c) for c in cu_seqs))
    if len(bounds) != len(records):
        raise ValueError(f"{len(bounds)} trajectories in the batch but {len(records)} episode records")
    mask = tensor_dict["action_mask"]
    seq_len = int(mask.shape[1])
    rows = np.zeros((len(bounds), max([1, *((b - a) * seq_len for a, b in bounds)])), dtype=np.int64)
    for j, (a, b) in enumerate(bounds):
        rows[j, : (b - a) * seq_len] = mask[a:b].reshape(-1).numpy()
    ends = turn_ends_from_mask(rows, [len(r.turn_rewards) for r in records])
    aligned = [dataclasses.replace(r, turn_ends=tuple(e)) for r, e in zip(records, ends)]
    out = np.asarray(advantages(EpisodeBatch.of(aligned, rows), gamma=gamma, eps=eps).tokens)
    adv = torch.zeros(mask.shape, dtype=torch.float32)
    for j, (a, b) in enumerate(bounds):
        adv[a:b] = torch.from_numpy(out[j, : (b - a) * seq_len]).reshape(b - a, seq_len).float()
    return adv


def _wrap_advantages(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantages(config: Any, tensor_dict: dict[str, Any], cu_seqs: Any, step: int) -> None:
        gamma = float((config.adv if "adv" in config else config).gamma)  # head passes the whole config
        original(config, tensor_dict, cu_seqs, step)
        rt = current()
        records, rt.pending = rt.pending, None
        if records is None:
            raise RuntimeError("gymverse.perpo=true but the batch carries no GymVerse episode records")
        tensor_dict["advantages"] = perpo_advantages(tensor_dict, cu_seqs, records, gamma=gamma)

    compute_advantages.__gymverse_original__ = original  # type: ignore[attr-defined]
    return compute_advantages


def _legacy_load_dir(config: Any) -> str | None:
    """The folder RL2 0.0.2's ``load_ckpt`` resolves."""
    target = config.trainer.load_ckpt_from
    if target == "latest":
        dirs = glob.glob(f"{config.trainer.save_dir}/step*")
        return max(dirs, key=lambda d: int(d.split("/step")[-1])) if dirs else None
    return None if target is None else str(target)


def _checkpoint_hooks(save: Any, load: Any, load_dir: Callable[[Any], str | None]) -> tuple[Any, Any]:
    @functools.wraps(save)
    def save_ckpt(trainer: Any, workers: Any, step: int) -> None:
        save(trainer, workers, step)
        cfg = trainer.config.trainer
        if cfg.save_freq is not None and step % cfg.save_freq == 0 and dist.get_rank() == 0:  # RL2 saved this step
            save_checkpoint(current().curriculum, os.path.join(cfg.save_dir, f"step{step}"), step=step)

    @functools.wraps(load)
    def load_ckpt(trainer: Any, workers: Any) -> int:
        step = int(load(trainer, workers))
        folder = load_dir(trainer)
        if folder is not None and dist.get_rank() == 0:
            load_checkpoint(current().curriculum, folder)
        return step

    return save_ckpt, load_ckpt


def install(settings: Settings) -> Runtime:
    """Configure this process and wrap RL2's hooks for `settings` (idempotent: a second call re-installs)."""
    import RL2.utils.algorithms as algorithms
    from RL2.workers.rollout import Rollout

    uninstall()
    rt = configure(settings)
    is_legacy = "rollout" in Rollout.__dict__  # 0.0.2 has the per-sample method; the head has SampleGroup
    _set(Rollout, "__call__", _wrap_call(Rollout.__dict__["__call__"], is_legacy))
    ppo = sys.modules.get("RL2.trainer.ppo")
    if is_legacy:
        import RL2.utils.checkpointing as ckpt

        _set(Rollout, "rollout", episodes.rollout)
        hooks = _checkpoint_hooks(ckpt.save_ckpt, ckpt.load_ckpt, lambda t: _legacy_load_dir(t.config))
        owners: list[Any] = [ckpt, ppo]
    else:
        from RL2.datasets.rl import SampleGroup
        from RL2.trainer.base import Trainer  # head: Trainer methods; `load_dir` is resolved in Trainer.__init__

        _set(SampleGroup, "to_all_tensor_dicts_and_metrics", _wrap_tensor_dicts(SampleGroup.__dict__[_TD]))
        hooks = _checkpoint_hooks(Trainer.save_ckpt, Trainer.load_ckpt, lambda t: t.load_dir)
        owners = [Trainer]
    for owner in [o for o in owners if o is not None] if settings.curriculum.active else []:
        _set(owner, "save_ckpt", hooks[0])
        _set(owner, "load_ckpt", hooks[1])
    if settings.perpo:
        wrapped = _wrap_advantages(algorithms.compute_advantages)
        for module in (algorithms, ppo):
            if module is not None:
                _set(module, "compute_advantages", wrapped)
    return rt


_TD = "to_all_tensor_dicts_and_metrics"
