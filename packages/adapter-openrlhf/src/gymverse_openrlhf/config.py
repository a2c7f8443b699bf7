"""The ``--gymverse.*`` flags (``norm``, ``eps``, and each `CurriculumOptions` knob under its one name), carried to
every Ray worker in one JSON environment variable."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gymverse.curriculum.options import KNOBS, CurriculumOptions
from gymverse.perpo import DEFAULT_EPS

ENV_VAR = "GYMVERSE_OPENRLHF"


@dataclass(frozen=True)
class GymVerseConfig:
    norm: str = "off"  # "env": PERPO per env, "batch": one group (ReBN), "off": OpenRLHF's estimator
    eps: float = DEFAULT_EPS
    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    pool_size: int = 256  # sessions per rollout process (the launcher sizes it from OpenRLHF's batch settings)
    ckpt_path: str = ""  # OpenRLHF's --ckpt.path (absolute)

    @property
    def active(self) -> bool:
        return self.norm != "off" or self.curriculum.active or self.curriculum.max_turns is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GymVerseConfig:
        data = json.loads(text)
        return cls(**{**data, "curriculum": CurriculumOptions.from_dict(data.get("curriculum", {}))})


def split_argv(argv: Sequence[str]) -> tuple[GymVerseConfig, list[str]]:
    """``--gymverse.k v``, ``--gymverse.k=v`` or a bare ``--gymverse.k`` (true) as a config; the rest untouched."""
    raw: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg, i = argv[i], i + 1
        if not arg.startswith("--gymverse."):
            rest.append(arg)
            continue
        key, eq, value = arg[len("--gymverse.") :].partition("=")
        if not eq:
            value = "true"
            if i < len(argv) and not argv[i].startswith("--"):
                value, i = argv[i], i + 1
        raw[key] = value
    unknown = sorted(set(raw) - set(KNOBS) - {"norm", "eps"})
    if unknown or raw.get("norm", "off") not in ("off", "env", "batch"):
        raise SystemExit(f"unknown GymVerse option(s) {['--gymverse.' + k for k in unknown]} or --gymverse.norm")
    try:
        opts = CurriculumOptions.parse({k: v for k, v in raw.items() if k in KNOBS}, prefix="--gymverse.")
        return GymVerseConfig(raw.get("norm", "off"), float(raw.get("eps", DEFAULT_EPS)), opts), rest
    except ValueError as err:
        raise SystemExit(f"gymverse: {err}") from None


def with_openrlhf(cfg: GymVerseConfig, args: Any) -> GymVerseConfig:
    """`cfg` with what OpenRLHF's parsed arguments decide: the checkpoint folder, the session pool's size."""
    from gymverse.pool import pool_size_for

    rollout = args.rollout
    episodes = (rollout.vllm_generate_batch_size or rollout.batch_size) * rollout.n_samples_per_prompt
    if getattr(args.eval, "dataset", None):
        episodes = max(episodes, rollout.batch_size * args.eval.n_samples_per_prompt)
    return replace(cfg, pool_size=pool_size_for(episodes), ckpt_path=os.path.abspath(args.ckpt.path))
