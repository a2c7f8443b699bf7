"""Composable env wrappers (Gymnasium-style): history, chat rendering, episode statistics, time limits.

Every wrapper subclasses `gymverse.core.Wrapper` through `LiveWrapper`: reads and public writes reach the base env
live, `set_complexity` and `unwrapped` pass through any stack, and `get_state/set_state/clone` include each
wrapper's own fields.
"""

from gymverse.wrappers.base import LiveWrapper
from gymverse.wrappers.chat import ChatWrapper, render_plain
from gymverse.wrappers.history import HistoryWrapper
from gymverse.wrappers.stats import EpisodeStatsWrapper, TimeLimit

__all__ = ["ChatWrapper", "EpisodeStatsWrapper", "HistoryWrapper", "LiveWrapper", "TimeLimit", "render_plain"]
