"""The file for OpenRLHF's ``--train.agent_func_path`` (``gymverse-openrlhf agent-path`` prints its path)."""

from gymverse_openrlhf.executor import AgentExecutor

__all__ = ["AgentExecutor"]
