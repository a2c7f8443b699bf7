"""The ``--gymverse.*`` flags of a run, and how they reach every Ray worker (one JSON environment variable).

``--gymverse.norm {off,env,batch}`` and ``--gymverse.eps`` are the adapter's; every other ``--gymverse.<knob>`` is
a `gymverse.curriculum.CurriculumOptions` knob under its one name (``--gymverse.evolve``, ``--gymverse.patience 2``,
``--gymverse.horizon 10,20,30``, ...). The launcher adds what it reads off OpenRLHF's parsed arguments.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from gymverse.curriculum.options import KNOBS, CurriculumOptions
from gymverse.perpo import DEFAULT_EPS

#: Environment variable carrying the JSON config to the driver and (through Ray's runtime_env) to every worker.
ENV_VAR = "GYMVERSE_OPENRLHF"
NORM_MODES = ("off", "env", "batch")


@dataclass(frozen=True)
class GymVerseConfig:
    """GymVerse options of one training run (defaults: OpenRLHF's own behaviour)."""

    norm: str = "off"  # "env": PERPO per env, "batch": one group (ReBN), "off": OpenRLHF's estimator
    eps: float = DEFAULT_EPS
    curriculum: CurriculumOptions = field(default_factory=CurriculumOptions)
    pool_size: int = 256  # sessions per rollout process (the launcher sizes it from OpenRLHF's batch settings)
    ckpt_path: str = ""  # OpenRLHF's --ckpt.path (absolute)

    def __post_init__(self) -> None:
        if self.norm not in NORM_MODES:
            raise ValueError(f"--gymverse.norm must be one of {NORM_MODES}, got {self.norm!r}")
        if not self.eps >= 0:
            raise ValueError(f"--gymverse.eps must be >= 0, got {self.eps}")

    @property
    def active(self) -> bool:
        """Whether any GymVerse behaviour is switched on."""
        return self.norm != "off" or self.curriculum.active or self.curriculum.max_turns is not None

    def to_json(self) -> str:
        """JSON form (the value of `ENV_VAR`)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GymVerseConfig:
        """Inverse of `to_json`; unknown keys are an error naming them."""
        data = json.loads(text)
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{ENV_VAR}: unknown keys {unknown}")
        return cls(**{**data, "curriculum": CurriculumOptions.from_dict(data.get("curriculum", {}))})

    @classmethod
    def from_env(cls) -> GymVerseConfig:
        """The config of this process (defaults when `ENV_VAR` is unset)."""
        text = os.environ.get(ENV_VAR)
        return cls.from_json(text) if text else cls()


def split_argv(argv: Sequence[str]) -> tuple[GymVerseConfig, list[str]]:
    """The ``--gymverse.*`` flags as a config, and the OpenRLHF arguments untouched.

    ``--gymverse.k v``, ``--gymverse.k=v`` and a bare ``--gymverse.k`` (true) are accepted; a bad flag or value
    exits with a one-line reason.
    """
    raw: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
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
    if unknown:
        raise SystemExit(f"unknown GymVerse option(s) {['--gymverse.' + k for k in unknown]}; see the README")
    try:
        opts = CurriculumOptions.parse({k: v for k, v in raw.items() if k in KNOBS}, prefix="--gymverse.")
        cfg = GymVerseConfig(raw.get("norm", "off"), float(raw.get("eps", DEFAULT_EPS)), opts)
    except ValueError as err:
        raise SystemExit(f"gymverse: {err}") from None
    return cfg, rest


def with_openrlhf(cfg: GymVerseConfig, args: Any) -> GymVerseConfig:
    """`cfg` with what OpenRLHF's parsed arguments decide: the checkpoint folder and the session pool size."""
    from gymverse.vector.pool import pool_size_for

    rollout = args.rollout
    episodes = (rollout.vllm_generate_batch_size or rollout.batch_size) * rollout.n_samples_per_prompt
    if getattr(args.eval, "dataset", None):
        episodes = max(episodes, rollout.batch_size * args.eval.n_samples_per_prompt)
    return replace(cfg, pool_size=pool_size_for(episodes), ckpt_path=os.path.abspath(args.ckpt.path))
