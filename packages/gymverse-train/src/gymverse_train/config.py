"""`TrainConfig`: every setting of a `gymverse train` run (saved in checkpoints, JSON round trip)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gymverse.curriculum import CurriculumOptions, CurriculumState

from gymverse_train.advantages import ALGOS


@dataclass
class TrainConfig:
    """A training run: model, envs, batch shape, algorithm, curriculum and optimisation settings."""

    model: str = "smollm2"
    envs: list[str] = field(default_factory=lambda: ["demo:EchoTarget"])
    steps: int = 40
    algo: str = "perpo"
    evolve: bool = False
    lora: bool = False
    lora_rank: int = 16
    seed: int = 0
    prompts_per_env: int = 4  # distinct env instances (seeds) per env per step
    group_size: int = 4  # episodes per instance (GRPO/RLOO groups)
    level: int = 1  # initial complexity (fixed when evolution is off)
    max_turns: int | None = None  # turn cap (None: the env's own budget)
    horizon_rounds: list[int] | None = None  # stepwise horizon schedule (ScalingInter-RL) ...
    horizon_every: int = 10  # ... advancing every this many steps
    promote_at: float = 0.8
    demote_at: float = 0.1
    patience: int = 3
    gamma: float = 1.0
    max_new_tokens: int = 48  # per turn
    max_response_tokens: int = 512  # per episode, replies and env turns together
    temperature: float = 1.0
    top_p: float = 1.0
    lr: float = 1e-5
    clip: float = 0.2
    epochs: int = 1
    minibatches: int = 1
    micro_batch: int = 8
    max_grad_norm: float = 1.0
    system_prompt: str = ""
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None  # torch CPU threads
    save_every: int = 10

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"unknown algo {self.algo!r}; choose one of {', '.join(ALGOS)}")
        if not self.envs:
            raise ValueError("--envs needs at least one env id")
        for name in ("steps", "prompts_per_env", "group_size", "max_new_tokens", "micro_batch", "epochs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.algo in ("grpo", "rloo") and self.group_size < 2:
            raise ValueError(f"--algo {self.algo} compares episodes of one instance: use --group-size >= 2")
        if not 0 < self.clip < 1:
            raise ValueError(f"clip must be in (0, 1), got {self.clip}")

    @property
    def batch_size(self) -> int:
        """Episodes per step."""
        return len(self.envs) * self.prompts_per_env * self.group_size

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Inverse of `to_dict` (unknown keys are an error naming them)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown train setting(s) {unknown}")
        return cls(**dict(data))

    def curriculum_options(self) -> CurriculumOptions:
        """The run's curriculum knobs, in the names every adapter uses."""
        return CurriculumOptions(
            evolve=self.evolve,
            initial_level=self.level,
            promote_at=self.promote_at,
            demote_at=self.demote_at,
            patience=self.patience,
            max_turns=self.max_turns,
            horizon=",".join(str(r) for r in self.horizon_rounds or []),
            horizon_interval=self.horizon_every,
        )

    def curriculum(self) -> CurriculumState:
        """The run's core `CurriculumState` (evolution per env; horizon schedule or fixed turn cap)."""
        return CurriculumState.from_config(self.curriculum_options().to_config())
