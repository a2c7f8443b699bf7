"""Test helpers other packages reuse: a scripted OpenAI-compatible server and a by-stage reply router."""

from gymverse_synth.testing.router import StageRouter, is_design_request
from gymverse_synth.testing.scripted_server import RecordedRequest, Reply, ScriptedLLMServer

__all__ = ["RecordedRequest", "Reply", "ScriptedLLMServer", "StageRouter", "is_design_request"]
