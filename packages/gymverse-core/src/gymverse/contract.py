"""The value types of the env contract: `EnvMetadata`, `StepResult`, domains and the reward constants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Domain = Literal["game", "algorithm", "logic", "tool-use", "other"]
DOMAINS: tuple[str, ...] = ("game", "algorithm", "logic", "tool-use", "other")

SUCCESS_REWARD = 1.0
FORMAT_PENALTY = -0.1


@dataclass(frozen=True)
class EnvMetadata:
    """Static description of an environment family member."""

    name: str
    family: str
    domain: Domain
    description: str
    action_format: str = r"\boxed{...}"
    max_turns: int = 50
    reward_range: tuple[float, float] = (FORMAT_PENALTY, SUCCESS_REWARD)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the metadata."""
        return {
            "name": self.name,
            "family": self.family,
            "domain": self.domain,
            "description": self.description,
            "action_format": self.action_format,
            "max_turns": self.max_turns,
            "reward_range": list(self.reward_range),
            "extra": dict(self.extra),
        }


class StepResult(NamedTuple):
    """Result of `Env.step`; unpacks as Gymnasium's 5-tuple."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def done(self) -> bool:
        """True when the episode ended for any reason."""
        return self.terminated or self.truncated


__all__ = ["DOMAINS", "FORMAT_PENALTY", "SUCCESS_REWARD", "Domain", "EnvMetadata", "StepResult"]
