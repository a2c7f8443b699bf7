"""Test helpers other packages reuse: a scripted OpenAI-compatible server."""

from gymverse_synth.testing.scripted_server import RecordedRequest, Reply, ScriptedLLMServer

__all__ = ["RecordedRequest", "Reply", "ScriptedLLMServer"]
