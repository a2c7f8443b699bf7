"""The records of an evaluation and their JSON form (``evaluation.json``); see ``SCHEMA.md`` next to this file.

Every record is a dataclass with ``to_dict``/``from_dict``; ``EvaluationReport.from_dict(r.to_dict())`` gives an
equal report. Readers should check ``schema_version``: the major number changes only on incompatible changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = "1.2"
VERDICTS = ("correct", "incorrect", "unverified", "error")
BUCKETS = ("easy", "medium", "hard")


@dataclass
class LevelResult:
    """Success of one policy at one complexity level over `n` seeded episodes."""

    level: int
    n: int
    successes: int
    rate: float
    #: Unbiased pass@k for each valid k (keys are k as strings, JSON-style).
    pass_at_k: dict[str, float] = field(default_factory=dict)
    mean_turns: float = 0.0
    #: Episodes that ended because the env or policy raised.
    errors: int = 0
    first_error: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LevelResult:
        """Inverse of `dataclasses.asdict`."""
        return cls(**{**d, "pass_at_k": {str(k): float(v) for k, v in d.get("pass_at_k", {}).items()}})


@dataclass
class PolicyDifficulty:
    """One policy on one env: per-level results plus the trend of success over level."""

    policy: str
    levels: list[LevelResult]
    slope: float | None = None
    spearman: float | None = None
    mean_rate: float = 0.0
    error: str | None = None

    def rate_at(self, level: int) -> float | None:
        """The success rate at `level`, or None when that level was not measured."""
        return next((lv.rate for lv in self.levels if lv.level == level), None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyDifficulty:
        """Inverse of `dataclasses.asdict`."""
        return cls(**{**d, "levels": [LevelResult.from_dict(x) for x in d.get("levels", [])]})


@dataclass
class Correctness:
    """Verdict (``correct``/``incorrect``/``unverified``/``error``) with human-readable reasons and the evidence."""

    verdict: str
    reasons: list[str] = field(default_factory=list)
    #: Checker summary: ``passed``, ``n_checks``, ``failed`` ({check name: first failure reason}).
    checker: dict[str, Any] = field(default_factory=dict)
    #: Oracle episodes per level ("1".."10"): ``{"n", "successes"}``.
    oracle_by_level: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Degenerate-policy success rates: ``{policy: {level: rate}}`` for levels >= 5.
    degeneracy: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The LLM rubric judge's verdict, when a judge was configured and the env has a spec.
    rubric: dict[str, Any] | None = None
    #: Facts that are not defects: the success rule used, the reward range, no oracle / no random action.
    notes: list[str] = field(default_factory=list)
    #: Probe summary: ``flags``, ``success_rule``, ``reward_range``, ``complexity`` (both paths), seeds probed.
    probes: dict[str, Any] = field(default_factory=dict)
    #: (1.2) Quality warnings' messages: reported apart, never part of the verdict.
    warnings: list[str] = field(default_factory=list)
    #: (1.2) Every finding: ``{"code", "severity": "defect"|"warning", "message", "evidence": {level, seed, ...}}``.
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        """True for the ``correct`` verdict only."""
        return self.verdict == "correct"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Correctness:
        """Inverse of `dataclasses.asdict`."""
        return cls(**d)


@dataclass
class EnvEvaluation:
    """Everything measured about one env."""

    name: str
    kind: str
    ref: str
    domain: str
    description: str
    correctness: Correctness
    difficulty: dict[str, PolicyDifficulty] = field(default_factory=dict)
    #: The policy whose curve defines slope/spearman/bucket below (the first non-oracle policy measured).
    reference_policy: str | None = None
    slope: float | None = None
    spearman: float | None = None
    bucket: str | None = None
    #: e.g. ``flat_difficulty`` (levels do not change success), ``near_duplicate``, ``incorrect``.
    flags: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvEvaluation:
        """Inverse of `to_dict`."""
        return cls(
            **{
                **d,
                "correctness": Correctness.from_dict(d["correctness"]),
                "difficulty": {k: PolicyDifficulty.from_dict(v) for k, v in d.get("difficulty", {}).items()},
            }
        )


@dataclass
class DiversityResult:
    """Suite-level diversity: embedding spread, Vendi score, near duplicates, structure, and a 2-D map."""

    embedder: str
    n: int
    #: ``{"description": {...}, "program": {...}}`` each with ``mean_cosine_distance`` and ``vendi``.
    embedding: dict[str, dict[str, float | None]] = field(default_factory=dict)
    #: Pairs ``{"a", "b", "kind", "similarity"}`` above the near-duplicate threshold.
    near_duplicates: list[dict[str, Any]] = field(default_factory=list)
    #: ``verb_jaccard_distance`` and ``ast_ngram_distance`` (mean pairwise), each in [0, 1].
    structural: dict[str, float | None] = field(default_factory=dict)
    #: 2-D PCA map of the program+description embeddings: ``{"name", "domain", "x", "y"}``.
    map: list[dict[str, Any]] = field(default_factory=list)
    threshold: float = 0.95
    error: str | None = None
    #: Env name -> why its program was left out of the structural metrics (it defeated the analysis).
    env_errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DiversityResult:
        """Inverse of `dataclasses.asdict`."""
        return cls(**d)


@dataclass
class EvaluationReport:
    """The whole ``evaluation.json``."""

    run: dict[str, Any]
    envs: list[EnvEvaluation]
    diversity: DiversityResult | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    schema_version: str = SCHEMA_VERSION

    def env(self, name: str) -> EnvEvaluation:
        """The evaluation of the env called `name` (KeyError listing the names otherwise)."""
        for e in self.envs:
            if e.name == name:
                return e
        raise KeyError(f"no env {name!r} in this report; envs: {', '.join(e.name for e in self.envs)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (keys in a stable order)."""
        return {
            "schema_version": self.schema_version,
            "run": self.run,
            "summary": self.summary,
            "envs": [asdict(e) for e in self.envs],
            "diversity": asdict(self.diversity) if self.diversity is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvaluationReport:
        """Inverse of `to_dict`; rejects documents from an incompatible major schema version."""
        version = str(d.get("schema_version", ""))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise ValueError(f"evaluation schema {version!r} is not compatible with {SCHEMA_VERSION!r}")
        div = d.get("diversity")
        return cls(
            run=dict(d.get("run", {})),
            envs=[EnvEvaluation.from_dict(e) for e in d.get("envs", [])],
            diversity=DiversityResult.from_dict(div) if div is not None else None,
            summary=dict(d.get("summary", {})),
            schema_version=version,
        )

    def save(self, path: str | Path) -> Path:
        """Write the JSON document (NaN-free, indented) to `path`."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> EvaluationReport:
        """Read a document written by `save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


__all__ = [
    "BUCKETS",
    "SCHEMA_VERSION",
    "VERDICTS",
    "Correctness",
    "DiversityResult",
    "EnvEvaluation",
    "EvaluationReport",
    "LevelResult",
    "PolicyDifficulty",
]
