"""`play(env, policy)`: the one loop for a scripted episode (oracle runs, the checker, evaluation, the env host,
validation, the viewer's samples).

A policy is a callable ``(env, observation) -> action``; `scripted` builds the named ones (``random``, ``oracle``,
``constant``, ``mixed``) that the checker, evaluation and the env host share. The LLM rollout pipeline
(`gymverse.rollout.run_episode`: async sessions, tokens) is a different loop and does not use this one.

It takes any `gymverse.protocol.EnvLike` (an `Env`, a wrapper stack, a hosted or remote proxy) and imports nothing
from `gymverse.core`, which builds `run_oracle` on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gymverse.protocol import EnvLike

#: Why an episode stopped: it ended (terminated or truncated), the caller's `judge` found a problem in a step, it
#: used up `max_steps`, or the env or the policy raised.
StopReason = Literal["done", "bad_step", "max_steps", "error"]


Policy = Callable[[Any, str], Any]
StepHook = Callable[[str, str, Any], None]


@dataclass
class PlayResult:
    """One played episode: what was sent, what came back, and why it stopped."""

    #: What ``reset`` returned (None when `play` did not reset).
    start: Any = None
    actions: list[str] = field(default_factory=list)
    #: Every step result, in order (the env's own objects: `gymverse.core.StepResult` for a conforming env).
    steps: list[Any] = field(default_factory=list)
    stop: StopReason = "max_steps"
    #: The exception that stopped the episode (from the env or the policy), when ``stop == "error"``.
    error: Exception | None = None
    #: The step limit the episode ran under.
    max_steps: int = 0

    @property
    def turns(self) -> int:
        """Steps taken."""
        return len(self.steps)

    @property
    def rewards(self) -> list[float]:
        """Each step's reward."""
        return [res[1] for res in self.steps]

    @property
    def total_reward(self) -> float:
        """The rewards summed in step order."""
        total = 0.0
        for res in self.steps:
            total += res[1]
        return total

    @property
    def done(self) -> bool:
        """True when the last step ended the episode."""
        return self.stop == "done"

    @property
    def success(self) -> bool:
        """The episode ended and its last ``info["success"]`` is True (nothing else counts)."""
        return self.done and self.steps[-1][4].get("success") is True

    def reraise(self) -> PlayResult:
        """This result, or the exception that stopped the episode raised again (for callers that let it escape)."""
        if self.error is not None:
            raise self.error
        return self


def play(
    env: EnvLike,
    policy: Policy,
    *,
    seed: int | None = None,
    reset: bool = True,
    complexity: int | None = None,
    max_steps: int | None = None,
    judge: Callable[[Any], str | None] | None = None,
    on_start: Callable[[Any], None] | None = None,
    on_step: StepHook | None = None,
) -> PlayResult:
    """Play one episode: (set `complexity`, reset with `seed`,) then step with `policy` until it ends.

    The step limit is `max_steps`, else the env's ``max_turns + 1``. With ``reset=False`` the env is already
    mid-episode and the policy's first observation is ``""``. `judge` is the caller's rule for a step's value types
    (the checker and the env host pass `gymverse.conformance.step_type_problem`): a step it names a problem in ends
    the episode (``"bad_step"``). `on_start` sees
    what reset returned before the first action (a policy's per-episode setup); `on_step` sees ``(observation before,
    action, step result)`` as each step happens, so a recording survives a deadline that interrupts the episode.
    An `Exception` from the env, the policy or `on_step` ends the episode in ``error``; a `BaseException` (a
    deadline's `CallTimeout`, Ctrl-C) is not caught.
    """
    out = PlayResult()
    obs = ""
    try:
        if complexity is not None:
            env.set_complexity(complexity)
        if reset:
            out.start = env.reset(seed=seed)
            obs, _info = out.start
            if on_start is not None:
                on_start(out.start)
        out.max_steps = int(max_steps) if max_steps is not None else int(env.max_turns) + 1
        for _ in range(out.max_steps):
            action = policy(env, obs)
            res = env.step(action)
            if on_step is not None:  # before the step is kept: a step the hook rejects is not part of the result
                on_step(obs, action, res)
            out.actions.append(action)
            out.steps.append(res)
            if judge is not None and judge(res) is not None:
                out.stop = "bad_step"
                return out
            if res[2] or res[3]:
                out.stop = "done"
                return out
            obs = res[0]
    except Exception as err:
        out.stop, out.error = "error", err
    return out


def scripted(name: str, action: str | None = None) -> Policy:
    """A named scripted policy: ``random`` (the env's `sample_random_action`), ``oracle`` (its `solve`),
    ``constant`` (`action`, or the env's first random action), ``mixed`` (`action` spells each turn's choice,
    ``r`` random or ``o`` oracle; give `play` at most ``len(action)`` steps). An action that is not a string raises
    `TypeError` naming the policy, before it reaches the env."""
    if name not in ("random", "oracle", "constant", "mixed"):
        raise ValueError(f"policy must be random, oracle, constant or mixed, got {name!r}")
    fixed: list[Any] = [] if action is None or name != "constant" else [action]
    turn = [0]

    def act(env: Any, observation: str) -> str:
        if name == "constant":
            if not fixed:
                fixed.append(env.sample_random_action())
            choice = fixed[0]
        elif name == "mixed":
            coin = str(action)[turn[0]]
            turn[0] += 1
            choice = env.sample_random_action() if coin == "r" else env.solve()
        else:
            choice = env.sample_random_action() if name == "random" else env.solve()
        if not isinstance(choice, str):
            raise TypeError(f"{name} action is {type(choice).__name__}, expected str")
        return choice

    return act


__all__ = ["PlayResult", "Policy", "StopReason", "play", "scripted"]
