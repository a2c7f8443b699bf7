"""Spot checks in training: does an env accept a known-bad answer when it is not being evaluated?

An env could behave while it is evaluated (hosted in a sandbox) and accept any answer in training. Evaluation and
training give it the same gymverse module names (`EnvRecipe.build` imports the env host's module too:
`gymverse.pool.slot.load_env_host_modules`), but other tells remain (the process layout, the trainer's own
imports): so now and then a training session plays a known-bad answer on a shadow copy of its env, built from the
same recipe at the same level and seed, in the same worker threads as the session's own env. By the env contract
a malformed action never succeeds; an env whose shadow copy reports success is flagged (`EnvPool.flagged`, and
one warning per env id on the ``gymverse.pool`` logger).

What it cannot see: an env that accepts only *plausible* wrong answers in training, or that tells a shadow copy
from a live one by something the two do not share (e.g. counting the instances it built).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from gymverse.pool.slot import EnvRecipe

#: Answers no env may count as a success: an empty one and an empty ``\boxed{}``.
KNOWN_BAD_ANSWERS = ("", "\\boxed{}")
#: A spot check every this many episodes of one env id in one pool (its first episode is checked).
DEFAULT_EVERY = 64

log = logging.getLogger("gymverse.pool")


def accepts_known_bad(recipe: EnvRecipe, level: int | None, seed: int | None) -> list[str]:
    """The known-bad answers a fresh copy of the env (at `level`, reset with `seed`) reports as a success."""
    env = recipe.build()
    try:
        if level is not None:
            env.set_complexity(level)
        accepted = []
        for action in KNOWN_BAD_ANSWERS:
            env.reset(seed=seed)
            info = env.step(action)[4]
            if isinstance(info, dict) and info.get("success") is True:
                accepted.append(action)
        return accepted
    finally:
        env.close()


@dataclass
class SpotChecks:
    """Per env id: episodes seen, spot checks run, and the checks in which a known-bad answer succeeded."""

    every: int | None = DEFAULT_EVERY
    episodes: dict[str, int] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, list[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def due(self, env_id: str) -> bool:
        """Count an episode of `env_id`; whether this one gets a spot check."""
        if not self.every:
            return False
        with self._lock:
            n = self.episodes.get(env_id, 0)
            self.episodes[env_id] = n + 1
        return n % self.every == 0

    def record(self, env_id: str, accepted: list[str]) -> None:
        """Remember one spot check's outcome; warn the first time an env id accepts a known-bad answer."""
        with self._lock:
            self.checked[env_id] = self.checked.get(env_id, 0) + 1
            first = bool(accepted) and env_id not in self.accepted
            if accepted:
                self.accepted.setdefault(env_id, []).extend(a for a in accepted if a not in self.accepted[env_id])
        if first:
            log.warning(
                "env %s reported success for the known-bad answer(s) %r in a training spot check: it may behave "
                "only while it is evaluated",
                env_id,
                accepted,
            )

    def flagged(self) -> dict[str, list[str]]:
        """Env ids whose spot checks accepted a known-bad answer, with those answers."""
        with self._lock:
            return {k: list(v) for k, v in self.accepted.items()}


__all__ = ["DEFAULT_EVERY", "KNOWN_BAD_ANSWERS", "SpotChecks", "accepts_known_bad"]
