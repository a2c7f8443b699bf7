"""PERPO math: discounted returns, advantage normalizers and token placement, written once over the array API.

The one entry point for training is `advantages(batch, stats=None)` on a `gymverse.rollout.EpisodeBatch`
(`gymverse.perpo.batch`); every adapter and the local trainer call it. The rest are its building blocks.

The same functions take numpy arrays or torch tensors (any array-API namespace through `array_api_compat`);
gymverse never imports torch. Formulas are in `gymverse.perpo.normalize` and `gymverse.perpo.returns`.
"""

from gymverse.perpo.batch import BatchAdvantages, advantages, batch_stats
from gymverse.perpo.normalize import (
    DEFAULT_EPS,
    batch_normalize,
    env_normalize,
    episode_advantages,
    group_normalize,
    grpo_advantages,
    rloo_advantages,
)
from gymverse.perpo.returns import discounted_returns, fill_returns, returns_from_lists
from gymverse.perpo.stats import GroupStats, merge, normalize_with
from gymverse.perpo.tokens import (
    broadcast_sequence_advantages,
    place_turn_advantages,
    turn_ends_from_mask,
    turn_ids_from_mask,
)

__all__ = [
    "DEFAULT_EPS",
    "BatchAdvantages",
    "GroupStats",
    "advantages",
    "batch_normalize",
    "batch_stats",
    "broadcast_sequence_advantages",
    "discounted_returns",
    "env_normalize",
    "episode_advantages",
    "fill_returns",
    "group_normalize",
    "grpo_advantages",
    "merge",
    "normalize_with",
    "place_turn_advantages",
    "returns_from_lists",
    "rloo_advantages",
    "turn_ends_from_mask",
    "turn_ids_from_mask",
]
