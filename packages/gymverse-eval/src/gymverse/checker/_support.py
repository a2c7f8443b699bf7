"""Helpers shared by the checks: transcript canonicalization, guarded episodes, global-RNG snapshots, wrappers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gymverse.conformance import canon, step_type_problem
from gymverse.core import StepResult, Wrapper
from gymverse.play import play, scripted
from gymverse.protocol import EnvLike
from gymverse.sandbox.hosted import HostedEnv


def step_record(res: StepResult, action: str) -> Any:
    """One transcript entry: the action and everything the env returned."""
    obs, reward, terminated, truncated, info = res
    return canon([action, obs, reward, terminated, truncated, info])


_SET_TEXT = re.compile(r"\{[^{}]*\}")
_MISSING = "<missing>"


def _set_order_free(text: str) -> str:
    """`text` with the items of each ``{...}`` sorted: a set printed in another order reads the same."""
    return _SET_TEXT.sub(lambda m: "{" + ", ".join(sorted(p.strip() for p in m.group(0)[1:-1].split(","))) + "}", text)


def differ_at(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place where two canonical values differ, as (path, value in a, value in b); None when equal.

    Descends into dicts (by key) and lists (by position), so the path names the exact key; two strings that differ
    only in the printed order of a set (``{2, 1}`` vs ``{1, 2}``) are equal, as the env's own sets are."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=repr):
            where = f"{path}[{k!r}]"
            if k not in a or k not in b:
                return where, a.get(k, _MISSING), b.get(k, _MISSING)
            found = differ_at(a[k], b[k], where)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = differ_at(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else (f"{path} (length)", len(a), len(b))
    if isinstance(a, str) and isinstance(b, str) and a != b and _set_order_free(a) == _set_order_free(b):
        return None
    return None if a == b else (path or "(value)", a, b)


def same(a: Any, b: Any) -> bool:
    """Canonical values equal up to the printed order of sets (`differ_at`)."""
    return a == b or differ_at(a, b) is None


def first_difference(a: list[Any], b: list[Any]) -> str:
    """Where two transcripts first differ: the exact position or key and both values there."""
    found = differ_at(a, b)
    if found is None:
        return "no difference"
    where, x, y = found
    return f"at {where}: {short(x)} != {short(y)}"


def short(obj: Any, limit: int = 120) -> str:
    """A repr cut to `limit` characters."""
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Episode:
    """A guarded episode: the actions taken, what came back, and the exception that stopped it, if any."""

    actions: list[str] = field(default_factory=list)
    steps: list[StepResult] = field(default_factory=list)
    error: BaseException | None = None
    limit: int = 0

    @property
    def done(self) -> bool:
        """True when the last step ended the episode."""
        return bool(self.steps) and bool(self.steps[-1][2] or self.steps[-1][3])


def run_episode(env: EnvLike, limit: int, policy: str) -> Episode:
    """Step `env` (already reset) with random actions (`policy="random"`) or its oracle until it ends."""
    ep = Episode(limit=limit)
    if isinstance(env, HostedEnv):
        return _run_hosted(env, ep, policy)
    played = play(env, scripted(policy), reset=False, max_steps=limit, judge=step_type_problem)
    ep.actions, ep.steps, ep.error = played.actions, played.steps, played.error
    return ep


def _run_hosted(env: HostedEnv, ep: Episode, policy: str) -> Episode:
    """`run_episode` in one request to the env's host; the transcript is judged here, cut where ours would stop."""
    try:
        played = env.play(policy, reset=False, limit=ep.limit)
    except Exception as err:
        ep.error = err
        return ep
    for action, res in played.steps:
        ep.actions.append(action)
        ep.steps.append(res)
        if step_type_problem(res) is not None or res[2] or res[3]:
            return ep
    ep.error = played.error
    return ep


class CountingWrapper(Wrapper):
    """Counts the resets and steps that pass through it, to prove the stack forwards calls."""

    def __init__(self, env: EnvLike) -> None:
        super().__init__(env)
        self.resets = 0
        self.steps = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Count, then forward."""
        self.resets += 1
        return self.env.reset(seed=seed)

    def step(self, action: str) -> StepResult:
        """Count, then forward."""
        self.steps += 1
        return self.env.step(action)


class TagWrapper(Wrapper):
    """Adds a marker to `info`, like observation/reward wrappers in user code do."""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Forward and tag."""
        obs, info = self.env.reset(seed=seed)
        return obs, {**info, "checker_wrapped": True}

    def step(self, action: str) -> StepResult:
        """Forward and tag."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return StepResult(obs, reward, terminated, truncated, {**info, "checker_wrapped": True})
