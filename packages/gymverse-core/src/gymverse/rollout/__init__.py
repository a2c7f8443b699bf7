"""The shared multi-turn rollout collector: sessions, formatting policies and `RolloutCollector`."""

from gymverse.rollout.collector import Generate, RolloutCollector
from gymverse.rollout.formatting import ChatFormatter, Formatter, History, HistoryFormatter, Prompt
from gymverse.rollout.session import EnvSessionLike, InProcessSession, default_env_id, make_sessions

__all__ = [
    "ChatFormatter",
    "EnvSessionLike",
    "Formatter",
    "Generate",
    "History",
    "HistoryFormatter",
    "InProcessSession",
    "Prompt",
    "RolloutCollector",
    "default_env_id",
    "make_sessions",
]
