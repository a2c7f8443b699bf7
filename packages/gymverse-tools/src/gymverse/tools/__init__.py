"""Tools an agent calls from its text (python, search, MCP) and `ToolEnvWrapper`, which adds them to any env.

`SearchTool` needs the ``server``/``search`` extras and `MCPTool` the ``mcp`` extra; both import them lazily.
"""

from gymverse.tools.base import Tool, ToolCallError, extract_tag, trim
from gymverse.tools.mcp_tool import MCPTool
from gymverse.tools.python_tool import PythonTool
from gymverse.tools.search_tool import SearchTool
from gymverse.tools.wrapper import ToolEnvWrapper

__all__ = ["MCPTool", "PythonTool", "SearchTool", "Tool", "ToolCallError", "ToolEnvWrapper", "extract_tag", "trim"]
