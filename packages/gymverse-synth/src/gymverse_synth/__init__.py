"""GymVerse synthesis: LLM clients, seeds, the abstraction stage (design), and the tools later stages build on."""

from gymverse_synth.abstraction import AbstractionAttempt, AbstractionResult, aabstract, abstract, parse_design
from gymverse_synth.llm import Completion, LLMClient, LLMError, OpenAIClient, RecordReplayClient, ReplayMiss, get_client
from gymverse_synth.seeds import Seed, load_codeio_seeds, load_seeds_jsonl, seed_from_builtin
from gymverse_synth.spec import ActionSpec, ComplexityParam, EnvDesign

__version__ = "0.1.0"

__all__ = [
    "AbstractionAttempt",
    "AbstractionResult",
    "ActionSpec",
    "Completion",
    "ComplexityParam",
    "EnvDesign",
    "LLMClient",
    "LLMError",
    "OpenAIClient",
    "RecordReplayClient",
    "ReplayMiss",
    "Seed",
    "__version__",
    "aabstract",
    "abstract",
    "get_client",
    "load_codeio_seeds",
    "load_seeds_jsonl",
    "parse_design",
    "seed_from_builtin",
]
