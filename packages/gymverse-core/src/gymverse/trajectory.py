"""`Trajectory`: the one episode record every GymVerse component exchanges (JSONL on disk)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Turn:
    """One agent turn: the observation it saw, the action it took, the reward and info that came back."""

    observation: str
    action: str
    reward: float
    info: dict[str, Any] = field(default_factory=dict)
    ret: float | None = None  # discounted return G_t, filled in by gymverse.perpo / gymverse.rollout
    advantage: float | None = None  # this turn's normalized (PERPO) advantage, filled in by trainers that dump it


@dataclass
class EpisodeTokens:
    """The token record an RL framework trains on (filled by `gymverse.rollout.run_episode`).

    ``prompt_ids + response_ids`` is exactly the sequence the model saw: ``response_mask`` is 1 on the tokens the
    model generated (verbatim, never re-tokenized) and 0 on env/template tokens; ``response_logprobs`` holds the
    sampler's log-probs on model tokens and 0.0 elsewhere (None when the generator gave none); ``turn_ends[k]`` is
    the exclusive end, in ``response_ids``, of the model tokens of turn ``k`` (one entry per `Turn`).
    """

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] | None = None
    turn_ends: list[int] = field(default_factory=list)

    def turn_spans(self) -> list[tuple[int, int]]:
        """Per turn, ``(start, end)`` of its model tokens in ``response_ids`` (the run of 1s ending at its end)."""
        # the last non-1 before each end, found in C (a Python walk back cost ~1 µs per reply token)
        try:
            flags: bytes | None = bytes(self.response_mask)
        except (TypeError, ValueError):  # not small ints
            flags = None
        if flags is None or flags.translate(None, b"\x00\x01"):  # anything but 0/1: compare one by one
            flags = bytes(m == 1 for m in self.response_mask)
        return [(flags.rfind(0, 0, min(end, len(flags))) + 1, end) for end in self.turn_ends]


@dataclass
class Trajectory:
    """One episode: its turns plus env id, seed, complexity, success and per-episode metrics."""

    env_id: str
    seed: int | None
    complexity: int
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    truncated: bool = False
    final_observation: str = ""
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    episode_id: str = ""  # unique per episode: curricula count each episode once by it
    stop_reason: str = ""  # one of gymverse.failures.STOP_REASONS (what it means for training: there)
    tokens: EpisodeTokens | None = None

    @property
    def total_reward(self) -> float:
        """Undiscounted sum of rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def rewards(self) -> list[float]:
        """Per-turn rewards."""
        return [t.reward for t in self.turns]

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)

    def to_json(self) -> str:
        """One JSONL line (without the newline); numpy values in info/metrics become lists, others their repr."""
        return json.dumps(self.to_dict(), ensure_ascii=False, default=_jsonable)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """Inverse of `to_dict`."""
        d = dict(data)
        d["turns"] = [Turn(**t) for t in d.get("turns", [])]
        if d.get("tokens") is not None:
            d["tokens"] = EpisodeTokens(**d["tokens"])
        return cls(**d)


def write_jsonl(trajectories: Iterable[Trajectory], path: str | Path, append: bool = False) -> int:
    """Write trajectories one JSON object per line; returns how many were written."""
    n = 0
    with open(path, "a" if append else "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(t.to_json() + "\n")
            n += 1
    return n


def read_jsonl(path: str | Path) -> Iterator[Trajectory]:
    """Read trajectories written by `write_jsonl`; a corrupt line raises naming its line number."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError) as err:
                raise ValueError(f"{path}:{lineno}: not a trajectory record: {err}") from err


def _jsonable(obj: Any) -> Any:
    # numpy scalars and arrays in info dicts are common; everything else becomes its repr.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return repr(obj)
