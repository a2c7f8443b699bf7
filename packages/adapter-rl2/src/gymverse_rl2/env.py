"""The GymVerse env file for RL2's ``rollout.env_path`` (``gymverse-rl2 env-path``), run by RL2 in rank 0.

RL2 head calls ``generate(config, tokenizer, router_url, sample)`` (`gymverse_rl2.episodes.generate`). RL2 0.0.2
runs through the launcher (``python -m gymverse_rl2.train``); its own loop's ``reset``/``step`` refuse with that.
"""

from typing import Any

from gymverse_rl2.episodes import generate

__all__ = ["generate", "reset", "step"]

_LAUNCH = (
    "RL2 0.0.2 runs its own turn loop over decoded text (no exact reply tokens, its own turn limit); GymVerse "
    "episodes run through the core runner: launch with `python -m gymverse_rl2.train <the same overrides>`"
)


async def reset(extra_info: Any) -> Any:
    """RL2 0.0.2's reset hook: refused with the launch line."""
    raise RuntimeError(_LAUNCH)


async def step(state_text: str, action_text: str, extra_info: Any) -> Any:
    """RL2 0.0.2's step hook: refused with the launch line."""
    raise RuntimeError(_LAUNCH)
