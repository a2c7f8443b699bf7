"""The file for OpenRLHF's ``--train.agent_func_path`` (print its path with ``gymverse-openrlhf agent-path``).

OpenRLHF loads this file by path and instantiates its `AgentExecutor`: OpenRLHF's `MultiTurnAgentExecutor`
running one `GymVerseAgentInstance` (a GymVerse env session) per sample. Dataset: ``gymverse-openrlhf
make-dataset``, with ``--data.input_key prompt --data.label_key label``.
"""

from gymverse_openrlhf.instance import AgentExecutor, GymVerseAgentInstance

__all__ = ["AgentExecutor", "GymVerseAgentInstance"]
