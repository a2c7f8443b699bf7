"""GymVerse in RL2's hooks (installed by the launcher). Always: ``Rollout.__call__`` (validation flag, curriculum
step end, the batch's `EpisodeRecord` numbers taken out) and RL2 0.0.2's ``Rollout.rollout``. PERPO:
``compute_advantages`` (RL2's own first; off, advantages are RL2's bit for bit). Curriculum on: checkpoint
save/load also write/read the core's file in ``<save_dir>/step<N>``; RL2 resumes the highest ``step<N>`` (no
"latest" marker), so it is written right after RL2's folder: a crash in between fails the resume loudly."""

from __future__ import annotations

import functools
import glob
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from gymverse.curriculum.service import load_checkpoint, save_checkpoint
from gymverse.rollout import EpisodeRecord

from gymverse_rl2 import episodes
from gymverse_rl2.advantages import perpo_advantages
from gymverse_rl2.runtime import RECORD_TAG, Runtime, configure, current, training
from gymverse_rl2.settings import ENV_VAR, Settings

logger = logging.getLogger("gymverse_rl2")
_installed: list[tuple[Any, str, Any]] = []


def _set(owner: Any, name: str, value: Any) -> None:
    _installed.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)))
    setattr(owner, name, value)


def uninstall() -> None:
    """Restore every wrapped RL2 function (tests; a training process never needs it)."""
    while _installed:
        owner, name, original = _installed.pop()
        setattr(owner, name, original)


def _rank0() -> bool:
    import torch.distributed as dist

    return not dist.is_initialized() or dist.get_rank() == 0


def _after_rollout(out: Any, train: bool, step: int) -> Any:
    rt = current()
    if not _rank0():
        return out
    if train:
        from RL2.utils.logging import gather_and_log

        report = rt.curriculum.end_step()
        stats = {f"gymverse/level/{e}": [float(v)] for e, v in report.levels.items()}
        stats.update({f"gymverse/success/{e}": [v] for e, v in report.success.items()})
        if stats:
            gather_and_log(stats, step)
        for change in report.changes:
            logger.info("GymVerse %s: complexity %s -> %s", change["env_id"], change["old_level"], change["new_level"])
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict) and RECORD_TAG in out[0]:
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
        import torch

        all_tensor_dicts, metrics = original(self)
        for sample, tensor_dicts in zip(self.samples, all_tensor_dicts):
            key = current().add(EpisodeRecord.from_dict(sample.sample["gymverse"]))
            for td in tensor_dicts:
                td[RECORD_TAG] = torch.full_like(td["states"], key)
        return all_tensor_dicts, metrics

    return to_all_tensor_dicts_and_metrics


def _wrap_advantages(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantages(config: Any, tensor_dict: dict[str, Any], cu_seqs: Any, step: int) -> None:
        gamma = float((config.adv if "adv" in config else config).gamma)  # head passes the whole config
        original(config, tensor_dict, cu_seqs, step)
        rt = current()
        records, rt.pending = rt.pending, None
        if records is None:
            raise RuntimeError(
                "gymverse.perpo=true but this batch carries no GymVerse episode records: its samples did not come "
                "from the GymVerse env file (rollout.env_path=$(gymverse-rl2 env-path))"
            )
        tensor_dict["advantages"] = perpo_advantages(tensor_dict, cu_seqs, records, gamma=gamma)

    compute_advantages.__gymverse_original__ = original  # type: ignore[attr-defined]
    return compute_advantages


def _legacy_load_dir(config: Any) -> str | None:
    """The folder RL2 0.0.2's ``load_ckpt`` resolves (``trainer.load_ckpt_from``: a path, latest or null)."""
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
        if cfg.save_freq is not None and step % cfg.save_freq == 0 and _rank0():  # RL2 saved this step
            save_checkpoint(current().curriculum, os.path.join(cfg.save_dir, f"step{step}"), step=step)

    @functools.wraps(load)
    def load_ckpt(trainer: Any, workers: Any) -> int:
        step = int(load(trainer, workers))
        folder = load_dir(trainer)
        if folder is not None and _rank0():
            load_checkpoint(current().curriculum, folder)
        return step

    return save_ckpt, load_ckpt


def install(settings: Settings) -> Runtime:
    """Configure this process and wrap RL2's hooks for `settings` (idempotent: a second call re-installs)."""
    import RL2.utils.algorithms as algorithms
    from RL2.workers.rollout import Rollout

    uninstall()
    os.environ[ENV_VAR] = settings.to_json()
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
