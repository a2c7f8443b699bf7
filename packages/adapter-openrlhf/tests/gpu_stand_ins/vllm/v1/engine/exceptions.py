"""`vllm.v1.engine.exceptions`: what `AsyncLLM.generate` raises when a request fails or the engine dies."""


class EngineGenerateError(Exception):
    """Raised when a AsyncLLM.generate() fails. Recoverable."""


class EngineDeadError(Exception):
    """Raised when the EngineCore dies. Unrecoverable."""
