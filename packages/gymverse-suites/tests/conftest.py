"""Scripted play shared by the suite tests: follow a policy to the end of the episode and keep the transcript."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from gymverse.core import Env

Play = Callable[..., list[Any]]


def _play(env: Env, seed: int, policy: Callable[[Env], str] | None = None, limit: int = 1000) -> list[Any]:
    """Reset with `seed`, act with `policy` (default: the oracle) until the episode ends: [obs, (action, step)...]."""
    act = policy or (lambda e: e.solve())
    obs, _ = env.reset(seed=seed)
    transcript: list[Any] = [obs]
    for _ in range(limit):
        action = act(env)
        res = env.step(action)
        transcript.append((action, tuple(res[:4]), res.info.get("success")))
        if res.done:
            return transcript
    raise AssertionError(f"episode did not end within {limit} steps")


@pytest.fixture
def play() -> Play:
    """``play(env, seed, policy=None)``: the transcript of one episode (policy default: the env's oracle)."""
    return _play
