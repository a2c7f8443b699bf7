"""`vllm.v1.engine` (stand-in)."""
