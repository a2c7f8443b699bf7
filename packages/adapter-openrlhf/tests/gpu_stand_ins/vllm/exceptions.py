"""`vllm.exceptions`: the request validation error vLLM raises from ``generate`` (e.g. a prompt too long)."""


class VLLMValidationError(ValueError):
    """vLLM's validation error for one request."""
