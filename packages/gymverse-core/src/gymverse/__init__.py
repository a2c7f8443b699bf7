"""GymVerse: text environments for LLM agents, with complexity control, vectorized execution and PERPO."""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from gymverse.actions import ActionFormatError, CommandGrammar, extract_boxed, parse_boxed
from gymverse.core import Env, EnvLike, EnvMetadata, StepResult, Wrapper, run_oracle
from gymverse.registry import list_envs, make, register

__version__ = "0.1.0"

__all__ = [
    "ActionFormatError",
    "CommandGrammar",
    "Env",
    "EnvLike",
    "EnvMetadata",
    "StepResult",
    "Wrapper",
    "__version__",
    "extract_boxed",
    "list_envs",
    "make",
    "parse_boxed",
    "register",
    "run_oracle",
]
