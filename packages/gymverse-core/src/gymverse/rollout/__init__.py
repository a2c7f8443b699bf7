"""The one episode pipeline: sessions, renderers, `run_episode` and its batched form `RolloutCollector`.

Session (PoolSession from the shared pool | InProcessSession)
    -> run_episode(session, generate, renderer=..., horizon=...)  -> Trajectory (+ EpisodeTokens)
    -> EpisodeRecord.of(traj) through the framework's side channel  (gymverse.rollout.batch)
    -> CurriculumState.record / end_step                            (gymverse.curriculum)
    -> gymverse.perpo.advantages(EpisodeBatch)                      (gymverse.perpo)

Rows come from `EpisodeSpec` (`gymverse.rollout.dataset`); what a failed env or generation does to training is
`gymverse.failures`.
"""

from gymverse.failures import GenerationError
from gymverse.rollout.batch import EpisodeBatch, EpisodeRecord
from gymverse.rollout.batching import BatchedGenerate
from gymverse.rollout.collector import RolloutCollector, TextPolicy, text_generate
from gymverse.rollout.dataset import EpisodeSpec, episode_specs
from gymverse.rollout.episode import Generate, Generation, run_episode
from gymverse.rollout.render import (
    ByteTokenizer,
    ChatRenderer,
    PlainRenderer,
    Renderer,
    decode_prefixes,
    renderer_for,
    strip_thinking,
)
from gymverse.rollout.session import (
    FailedSession,
    InProcessSession,
    Session,
    default_env_id,
    make_sessions,
    open_session,
)

__all__ = [
    "BatchedGenerate",
    "ByteTokenizer",
    "ChatRenderer",
    "EpisodeBatch",
    "EpisodeRecord",
    "EpisodeSpec",
    "FailedSession",
    "Generate",
    "Generation",
    "GenerationError",
    "InProcessSession",
    "PlainRenderer",
    "Renderer",
    "RolloutCollector",
    "Session",
    "TextPolicy",
    "decode_prefixes",
    "default_env_id",
    "episode_specs",
    "make_sessions",
    "open_session",
    "renderer_for",
    "run_episode",
    "strip_thinking",
    "text_generate",
]
