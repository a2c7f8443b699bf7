"""The GymVerse env file for RL2's ``rollout.env_path`` (``gymverse-rl2 env-path``). RL2 head calls its
`generate`; RL2 0.0.2 runs through the launcher, and its own loop's ``reset``/``step`` refuse with that."""

from typing import Any

from gymverse_rl2.episodes import generate

__all__ = ["generate", "reset", "step"]


async def reset(*args: Any) -> Any:
    raise RuntimeError(
        "RL2 0.0.2 runs its own turn loop over decoded text (no exact reply tokens, its own turn limit); GymVerse "
        "episodes run through the core runner: launch with `python -m gymverse_rl2.train <the same overrides>`"
    )


step = reset
