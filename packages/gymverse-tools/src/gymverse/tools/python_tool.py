"""Python tool: runs ``<python>...</python>`` or fenced python blocks in the sandbox."""

from __future__ import annotations

import re
from typing import Protocol

from gymverse.sandbox import Sandbox, SandboxLimits, SandboxResult
from gymverse.tools.base import Tool, ToolCallError, extract_tag, trim

_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)


class Runner(Protocol):
    """Anything that runs source like `Sandbox.run` (a `Sandbox` or a `SandboxPool`)."""

    def run(self, source: str) -> SandboxResult:
        """Execute `source`."""
        ...


class PythonTool(Tool):
    """Executes the model's Python in a `Sandbox` (or a warm `SandboxPool`) and returns its output or error."""

    name = "python"

    def __init__(self, runner: Runner | None = None, *, max_output_chars: int = 2000, timeout: float = 10.0) -> None:
        self.runner: Runner = runner or Sandbox(SandboxLimits(timeout=timeout, memory_mb=1024))
        self.max_output_chars = max_output_chars

    def parse(self, action: str) -> str | None:
        """The code of the first python block, if any."""
        code = extract_tag(action, "python")
        if code is None:
            fence = _FENCE.search(action)
            if fence:
                code = fence.group(1).strip()
            elif re.search(r"```(?:python|py)[ \t]*\n", action):
                raise ToolCallError("a ```python block is opened but never closed with ```")
        if code is not None and not code:
            raise ToolCallError("the python block is empty")
        return code

    def execute(self, payload: str) -> str:
        """Run the code; the output (or the error and its traceback tail), trimmed."""
        result = self.runner.run(payload)
        out = result.stdout
        if result.ok:
            if result.value_repr is not None:
                out = f"{out}{result.value_repr}\n" if out else result.value_repr
            return trim(out.rstrip("\n"), self.max_output_chars) or "(no output)"
        detail = result.stderr.strip() or result.error or result.status
        if result.status != "error":
            detail = f"{result.error or result.status}" + (f"\n{result.stderr.strip()}" if result.stderr else "")
        text = f"{out}\n{detail}" if out else detail
        return trim(f"[{result.status}] {text}".rstrip(), self.max_output_chars)

    def instruction(self) -> str:
        """How to call it."""
        return "To run Python, write <python>code</python>; you will see its printed output or the error."
