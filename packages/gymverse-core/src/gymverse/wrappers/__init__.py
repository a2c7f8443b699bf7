"""Composable env wrappers (Gymnasium-style): history, chat rendering, episode statistics.

There is no time-limit wrapper: an env's turn cap is its `max_turns` (``make(env_id, max_turns=n)``, Gymnasium's
``max_episode_steps``), enforced by the env itself, and a training run's cap is `run_episode`'s ``horizon``.

Every wrapper subclasses `gymverse.Wrapper`, the one base (`LiveWrapper` is its former name): the `EnvLike` members
(reset, step, complexity, `unwrapped`, ...) pass through any stack, any other attribute is reached explicitly with
`get_wrapper_attr`/`set_wrapper_attr`, and `get_state/set_state/clone` include each wrapper's own fields.
"""

from gymverse.wrappers.base import LiveWrapper
from gymverse.wrappers.chat import ChatWrapper, render_plain
from gymverse.wrappers.history import HistoryWrapper
from gymverse.wrappers.stats import EpisodeStatsWrapper

__all__ = ["ChatWrapper", "EpisodeStatsWrapper", "HistoryWrapper", "LiveWrapper", "render_plain"]
