"""Scripted replies by pipeline stage, for a `ScriptedLLMServer` handler."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from gymverse_synth.testing.scripted_server import RecordedRequest, Reply


def is_design_request(request: RecordedRequest) -> bool:
    """Whether `request` is the abstraction stage's (it opens with the design system prompt)."""
    from gymverse_synth.abstraction import SYSTEM_PROMPT

    return str(request.messages[0]["content"]).startswith(SYSTEM_PROMPT.split("{guide}")[0])


class StageRouter:
    """Design requests get `designs` in order; program requests (construction, repair) get `programs`."""

    def __init__(self, designs: Iterable[str | Reply], programs: Iterable[str | Reply]) -> None:
        self.designs, self.programs = deque(designs), deque(programs)

    def __call__(self, request: RecordedRequest) -> str | Reply:
        return (self.designs if is_design_request(request) else self.programs).popleft()
