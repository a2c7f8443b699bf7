"""`vllm.utils.random_uuid`."""

import uuid


def random_uuid() -> str:
    """A random request id, as vLLM makes them."""
    return uuid.uuid4().hex
