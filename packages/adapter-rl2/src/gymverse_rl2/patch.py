"""Installing GymVerse into RL2's rank-0 hooks (done by the launcher, `gymverse_rl2.train`, before RL2 starts).

What is wrapped, and only when its option asks for it:

* always: ``Rollout.__call__`` marks validation rollouts (fixed evaluation level) and, after a training rollout,
  closes the curriculum step; on RL2 0.0.2 ``Rollout.rollout`` plays GymVerse episodes (`gymverse_rl2.legacy`).
* ``gymverse.perpo=true``: ``RL2.utils.algorithms.compute_advantages`` runs RL2's own first (logging), then
  replaces its per-prompt-group advantages with env-level PERPO (`gymverse_rl2.advantages`) from each
  trajectory's `EpisodeRecord` (its number rides in one extra tensor, taken out before RL2's workers see it).
* curriculum on (``gymverse.evolve`` or ``gymverse.horizon``): RL2's checkpoint save/load also write/read the
  curriculum with the core's `save_checkpoint`/`load_checkpoint` in the checkpoint's own folder
  (``<save_dir>/step<N>/gymverse_curriculum.json``), so resuming any step restores that step's levels. RL2 has no
  "latest" marker (it resumes the highest ``step<N>`` folder), so the file is written right after RL2's folder:
  a crash in between leaves a folder whose resume fails loudly (strict load), never one that resets levels.

With the defaults nothing touches advantages: RL2 computes them bit for bit as without GymVerse.
"""

from __future__ import annotations

import functools
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
    """Curriculum step end and the batch's episode records, on the rank-0 result of a rollout."""
    rt = current()
    if not _rank0():
        return out
    if train:
        report = rt.curriculum.end_step()
        from RL2.utils.logging import gather_and_log

        stats = {f"gymverse/level/{e}": [float(v)] for e, v in report.levels.items()}
        stats.update({f"gymverse/success/{e}": [v] for e, v in report.success.items()})
        if stats:
            gather_and_log(stats, step)
        for change in report.changes:
            logger.info("GymVerse %s: complexity %s -> %s", change["env_id"], change["old_level"], change["new_level"])
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict) and RECORD_TAG in out[0]:
        tensor_dict, cu_seqs = out
        keys = tensor_dict.pop(RECORD_TAG)
        rt.pending = [rt.records[int(keys[int(a), 0])] for a in cu_seqs[:-1]]
    rt.records.clear()
    return out


def _wrap_call(original: Callable[..., Any], is_legacy: bool) -> Callable[..., Any]:
    if is_legacy:  # 0.0.2: __call__(self, data_list, train, step), synchronous

        @functools.wraps(original)
        def call(self: Any, data_list: Any, train: bool, step: int) -> Any:
            token = training.set(bool(train))
            try:
                out = original(self, data_list, train, step)
            finally:
                training.reset(token)
            return _after_rollout(out, train, step)

        return call

    @functools.wraps(original)
    async def acall(self: Any, train: bool, step: int) -> Any:  # head: async __call__(self, train, step)
        token = training.set(bool(train))
        try:
            out = await original(self, train, step)
        finally:
            training.reset(token)
        return _after_rollout(out, train, step)

    return acall


def _wrap_tensor_dicts(original: Callable[..., Any]) -> Callable[..., Any]:
    """Head: tag each sequence of `SampleGroup.to_all_tensor_dicts_and_metrics` with its episode record."""

    @functools.wraps(original)
    def to_all_tensor_dicts_and_metrics(self: Any) -> Any:
        import torch

        all_tensor_dicts, metrics = original(self)
        rt = current()
        for sample, tensor_dicts in zip(self.samples, all_tensor_dicts):
            key = rt.add(EpisodeRecord.from_dict(sample.sample["gymverse"]))
            for td in tensor_dicts:
                td[RECORD_TAG] = torch.full_like(td["states"], key)
        return all_tensor_dicts, metrics

    return to_all_tensor_dicts_and_metrics


def _wrap_advantages(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantages(config: Any, tensor_dict: dict[str, Any], cu_seqs: Any, step: int) -> None:
        adv_cfg = config.adv if "adv" in config else config  # head passes the whole config, 0.0.2 `config.adv`
        original(config, tensor_dict, cu_seqs, step)
        rt = current()
        records, rt.pending = rt.pending, None
        if records is None:
            raise RuntimeError(
                "gymverse.perpo=true but this batch carries no GymVerse episode records: its samples did not come "
                "from the GymVerse env file (rollout.env_path=$(gymverse-rl2 env-path))"
            )
        tensor_dict["advantages"] = perpo_advantages(tensor_dict, cu_seqs, records, gamma=float(adv_cfg.gamma))

    compute_advantages.__gymverse_original__ = original  # type: ignore[attr-defined]
    return compute_advantages


def _legacy_load_dir(config: Any) -> str | None:
    """The directory RL2 0.0.2's ``load_ckpt`` resolves (``trainer.load_ckpt_from``: a path, latest or null)."""
    import glob

    target = config.trainer.load_ckpt_from
    if target == "latest":
        dirs = glob.glob(f"{config.trainer.save_dir}/step*")
        return max(dirs, key=lambda d: int(d.split("/step")[-1])) if dirs else None
    return None if target is None else str(target)


def _checkpoint_hooks(
    save: Callable[..., Any], load: Callable[..., Any], load_dir: Callable[[Any], str | None]
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``save(trainer, workers, step)`` / ``load(trainer, workers) -> step`` that also save/restore the curriculum."""

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


def _install_checkpoints(is_legacy: bool) -> None:
    if is_legacy:  # 0.0.2: functions in RL2.utils.checkpointing, imported by name into RL2.trainer.ppo
        import RL2.utils.checkpointing as ckpt

        save_ckpt, load_ckpt = _checkpoint_hooks(ckpt.save_ckpt, ckpt.load_ckpt, lambda t: _legacy_load_dir(t.config))
        for module in (ckpt, sys.modules.get("RL2.trainer.ppo")):
            if module is not None:
                _set(module, "save_ckpt", save_ckpt)
                _set(module, "load_ckpt", load_ckpt)
        return
    from RL2.trainer.base import Trainer  # head: Trainer methods; `load_dir` is resolved in Trainer.__init__

    save_method, load_method = _checkpoint_hooks(Trainer.save_ckpt, Trainer.load_ckpt, lambda t: t.load_dir)
    _set(Trainer, "save_ckpt", save_method)
    _set(Trainer, "load_ckpt", load_method)


def install(settings: Settings) -> Runtime:
    """Configure this process and wrap RL2's hooks for `settings` (idempotent: a second call re-installs)."""
    import RL2.utils.algorithms as algorithms
    from RL2.workers.rollout import Rollout

    uninstall()
    os.environ[ENV_VAR] = settings.to_json()
    rt = configure(settings)
    is_legacy = "rollout" in Rollout.__dict__  # 0.0.2 has the per-sample method; the head has SampleGroup
    if is_legacy:
        _set(Rollout, "rollout", episodes.rollout)
    _set(Rollout, "__call__", _wrap_call(Rollout.__dict__["__call__"], is_legacy))
    if not is_legacy:
        from RL2.datasets.rl import SampleGroup

        wrapped_td = _wrap_tensor_dicts(SampleGroup.__dict__["to_all_tensor_dicts_and_metrics"])
        _set(SampleGroup, "to_all_tensor_dicts_and_metrics", wrapped_td)
    if settings.perpo:
        wrapped = _wrap_advantages(algorithms.compute_advantages)
        for module in (algorithms, sys.modules.get("RL2.trainer.ppo")):
            if module is not None:
                _set(module, "compute_advantages", wrapped)
    if settings.curriculum.active:
        _install_checkpoints(is_legacy)
    return rt
