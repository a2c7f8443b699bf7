"""Environment evaluation: correctness, difficulty, diversity, JSON + HTML reports (`gymverse evaluate`).

Heavy dependencies (torch/transformers for MiniLM embeddings) are imported only when used.
"""

from gymverse.evaluate.correctness import CorrectnessConfig, judge_rubric, parse_rubric, verdict
from gymverse.evaluate.difficulty import DifficultyConfig, bucket, difficulty_flags, reference_policy
from gymverse.evaluate.diversity import HashingEmbedder, MiniLMEmbedder, evaluate_diversity, vendi_score
from gymverse.evaluate.passk import least_squares_slope, pass_at_k, spearman
from gymverse.evaluate.policies import LLMPolicy, NoisyOraclePolicy, make_policy, run_episode
from gymverse.evaluate.runner import DEFAULT_POLICIES, EvaluationConfig, evaluate_suite
from gymverse.evaluate.schema import (
    SCHEMA_VERSION,
    Correctness,
    DiversityResult,
    EnvEvaluation,
    EvaluationReport,
    LevelResult,
    PolicyDifficulty,
)
from gymverse.evaluate.suites import EnvEntry, Suite, SuiteError, build_env, load_suite

__all__ = [
    "DEFAULT_POLICIES",
    "SCHEMA_VERSION",
    "Correctness",
    "CorrectnessConfig",
    "DifficultyConfig",
    "DiversityResult",
    "EnvEntry",
    "EnvEvaluation",
    "EvaluationConfig",
    "EvaluationReport",
    "HashingEmbedder",
    "LLMPolicy",
    "LevelResult",
    "MiniLMEmbedder",
    "NoisyOraclePolicy",
    "PolicyDifficulty",
    "Suite",
    "SuiteError",
    "bucket",
    "build_env",
    "difficulty_flags",
    "evaluate_diversity",
    "evaluate_suite",
    "judge_rubric",
    "least_squares_slope",
    "load_suite",
    "make_policy",
    "parse_rubric",
    "pass_at_k",
    "reference_policy",
    "run_episode",
    "spearman",
    "vendi_score",
    "verdict",
]
