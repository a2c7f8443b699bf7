"""RL2 0.0.2's own multi-turn env contract (``reset``/``step`` over text) with GymVerse's env logic: the native arm.

RL2 executes this file as its ``rollout.env_path`` (``importlib``, like any RL2 env) and drives it from its own
turn loop (`RL2.workers.rollout.Rollout.rollout`). It follows RL2's own Gym examples (``envs/gem_env_*.py``):
the env object is stepped synchronously inside the coroutine and observations are wrapped in hard-coded Qwen
chat strings. Unlike those examples, ``next_state`` extends ``state_text + action_text``, so RL2 keeps one
sequence per episode (its prefix branch), as the GymVerse arm does; the env objects are the same built-in
GymVerse envs (``gymverse.make``), so both arms run the same env logic.
"""

from __future__ import annotations

import itertools
from typing import Any

import gymverse

_ENVS: dict[int, Any] = {}
_IDS = itertools.count()


def _user(observation: str) -> str:
    return f"<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n"


async def reset(extra_info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A fresh env for the row's ``env_id``/``seed``; returns the prompt text and the episode's extra_info."""
    env = gymverse.make(extra_info["env_id"])
    obs, _ = env.reset(seed=extra_info.get("seed"))
    key = next(_IDS)
    _ENVS[key] = env
    return _user(obs), {**extra_info, "episode": key}


async def step(state_text: str, action_text: str, extra_info: dict[str, Any]) -> dict[str, Any]:
    """Apply the reply's text; RL2's ``{next_state, reward, score, done, extra_info}``."""
    env = _ENVS[extra_info["episode"]]
    obs, reward, terminated, truncated, _ = env.step(action_text)
    done = bool(terminated or truncated)
    if done:
        _ENVS.pop(extra_info["episode"]).close()
    return {
        # the reply's tokens already end with <|im_end|> (the engine's stop token; `action_text` omits it)
        "next_state": state_text + action_text + "\n" + _user(obs),
        "reward": float(reward),
        "score": float(reward),
        "done": done,
        "extra_info": extra_info,
    }
