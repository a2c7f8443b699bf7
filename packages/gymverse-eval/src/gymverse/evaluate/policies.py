"""Reference policies for difficulty and degeneracy measurements, and `run_episode`.

Policies are named by short specs so a worker process can rebuild them: ``random``, ``oracle``, ``noisy`` (noisy
oracle, ε = 0.3), ``noisy:0.1`` (ε = 0.1), ``constant`` (repeats one well-formed action). The LLM policy needs a
client and is built in the parent process (`LLMPolicy`).

Success is read only from ``info["success"] is True`` at the end of the episode; rewards are recorded but never
count as success (shaped rewards would otherwise inflate the rates).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gymverse.checker.report import describe_error
from gymverse.core import StepResult
from gymverse.deadline import CallTimeout, deadline
from gymverse.play import play
from gymverse.protocol import EnvLike
from gymverse.sandbox.hosted import HostedEnv
from gymverse.trajectory import Trajectory, Turn

DEFAULT_EPSILON = 0.3
#: Coin flips sent with a hosted noisy-oracle episode when no step guard is set (a longer episode is played live).
SCRIPTED_TURNS = 512


class Policy(Protocol):
    """Chooses actions for one episode at a time."""

    name: str

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Called after `env.reset(seed)` with the first observation."""
        ...

    def act(self, env: EnvLike, observation: str) -> str:
        """The next action text."""
        ...


class RandomPolicy:
    """The env's own `sample_random_action` (well-formed but aimless)."""

    name = "random"

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Nothing to prepare."""

    def act(self, env: EnvLike, observation: str) -> str:
        """A random well-formed action."""
        return env.sample_random_action()


class ConstantPolicy:
    """Repeats the first random action of the episode: the degenerate baseline no env should reward.

    (`probes` plays the fuller set of constant answers: 0, 1, -1, empty, yes/no, the env's examples.)
    """

    name = "constant"

    def __init__(self) -> None:
        self._action = ""

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Fix the action for this episode."""
        self._action = env.sample_random_action()

    def act(self, env: EnvLike, observation: str) -> str:
        """The same action every turn."""
        return self._action


class OraclePolicy:
    """The env's `solve()`."""

    name = "oracle"

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Nothing to prepare."""

    def act(self, env: EnvLike, observation: str) -> str:
        """The oracle's next action."""
        return env.solve()


class NoisyOraclePolicy:
    """The oracle, except that with probability ε a random action is taken (own RNG, seeded per episode)."""

    def __init__(self, epsilon: float = DEFAULT_EPSILON) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"noisy oracle epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = float(epsilon)
        self.name = f"noisy:{self.epsilon:g}"
        self._rng = np.random.default_rng(0)

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Reseed the coin flips from the episode seed so runs are reproducible."""
        self._rng = np.random.default_rng([int(seed), 0x6E6F697379])

    def script(self, seed: int, turns: int) -> str:
        """The episode's coin flips up front, one letter a turn (``r`` random, ``o`` oracle): what `act` draws
        after `begin` with this seed, for a hosted env's host to follow (`HostedEnv.plays`, policy ``mixed``)."""
        rng = np.random.default_rng([int(seed), 0x6E6F697379])
        return "".join("r" if rng.random() < self.epsilon else "o" for _ in range(turns))

    def act(self, env: EnvLike, observation: str) -> str:
        """Oracle action, or a random one with probability ε."""
        if self._rng.random() < self.epsilon:
            return env.sample_random_action()
        return env.solve()


def parse_policy_spec(spec: str) -> str:
    """Normalize a policy spec (``noisy`` -> ``noisy:0.3``); raises ValueError naming the bad spec."""
    name, _, arg = spec.strip().partition(":")
    if name in ("random", "oracle", "constant") and not arg:
        return name
    if name == "noisy":
        try:
            eps = float(arg) if arg else DEFAULT_EPSILON
        except ValueError:
            raise ValueError(f"bad noisy-oracle epsilon in policy {spec!r}: expected e.g. 'noisy:0.2'") from None
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"noisy-oracle epsilon must be in [0, 1], got {spec!r}")
        return f"noisy:{eps:g}"
    if name == "llm":
        return "llm"
    raise ValueError(f"unknown policy {spec!r}: expected random, oracle, noisy[:EPS], constant or llm")


def make_policy(spec: str) -> Policy:
    """Build a scripted policy from its spec (the LLM policy is built with `LLMPolicy`)."""
    norm = parse_policy_spec(spec)
    if norm == "random":
        return RandomPolicy()
    if norm == "oracle":
        return OraclePolicy()
    if norm == "constant":
        return ConstantPolicy()
    if norm.startswith("noisy:"):
        return NoisyOraclePolicy(float(norm.split(":", 1)[1]))
    raise ValueError(f"policy {spec!r} needs an LLM client; build it with LLMPolicy")


DEFAULT_SYSTEM_PROMPT = (
    "You are an agent in a text environment.\n{description}\n"
    "Reply with exactly one action in the format {action_format}. Think briefly, then give the action."
)
DEFAULT_TURN_TEMPLATE = "{observation}"


class LLMPolicy:
    """An LLM client (gymverse-synth's ``complete(messages)``) as a policy: system prompt + the last few exchanges.

    `system_template` may use ``{description}``, ``{action_format}``, ``{name}``; `turn_template` uses
    ``{observation}`` and ``{turn}``. Sampling kwargs (temperature, max_tokens, ...) go to the client.
    """

    name = "llm"

    def __init__(
        self,
        client: Any,
        *,
        system_template: str = DEFAULT_SYSTEM_PROMPT,
        turn_template: str = DEFAULT_TURN_TEMPLATE,
        history_window: int = 4,
        **sampling: Any,
    ) -> None:
        if history_window < 0:
            raise ValueError(f"history_window must be >= 0, got {history_window}")
        self.client = client
        self.system_template = system_template
        self.turn_template = turn_template
        self.history_window = history_window
        self.sampling = {"temperature": 0.7, "max_tokens": 256, **sampling}
        self._system = ""
        self._history: list[tuple[str, str]] = []
        self._pending = ""

    def begin(self, env: EnvLike, seed: int, observation: str) -> None:
        """Render the system prompt from the env's metadata and clear the history."""
        md = env.metadata
        self._system = self.system_template.format(
            description=md.description, action_format=md.action_format, name=md.name
        )
        self._history = []

    def messages(self, observation: str, turn: int) -> list[dict[str, str]]:
        """The chat messages for the next decision."""
        msgs = [{"role": "system", "content": self._system}]
        window = self._history[-self.history_window :] if self.history_window else []
        for obs, action in window:
            msgs += [{"role": "user", "content": obs}, {"role": "assistant", "content": action}]
        msgs.append({"role": "user", "content": self.turn_template.format(observation=observation, turn=turn)})
        return msgs

    def act(self, env: EnvLike, observation: str) -> str:
        """Ask the model; the whole reply is the action (the env's parser extracts the move)."""
        user = self.turn_template.format(observation=observation, turn=env.turn)
        reply = self.client.complete(self.messages(observation, env.turn), **self.sampling)
        self._history.append((user, reply))
        return str(reply)


@dataclass
class Episode:
    """Outcome of one episode: success only from ``info["success"]``; the full `Trajectory` when recorded."""

    seed: int
    success: bool
    turns: int
    total_reward: float
    error: str | None = None
    trajectory: Trajectory | None = None
    #: It ended at its deadline (set by us, never read from `error`, which may quote the env).
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the trajectory, when recorded, under ``"trajectory"`` as its JSONL record)."""
        out: dict[str, Any] = {
            "seed": self.seed,
            "success": self.success,
            "turns": self.turns,
            "total_reward": self.total_reward,
            "error": self.error,
        }
        if self.trajectory is not None:
            out["trajectory"] = json.loads(self.trajectory.to_json())
        return out


def run_episode(
    env: EnvLike,
    policy: Policy,
    seed: int,
    max_steps: int | None = None,
    record: Trajectory | None = None,
    timeout: float | None = None,
) -> Episode:
    """Play one episode; exceptions and a `timeout` (seconds) end it as a failure with the error recorded.

    With `record` (a `Trajectory` carrying env id and metrics), every turn is appended to it and it is returned as
    ``Episode.trajectory`` with seed, complexity, success, truncation and error filled in.
    """
    try:
        with deadline(timeout, f"episode (seed {seed})"):
            return _play(env, policy, seed, max_steps, record)
    except CallTimeout as err:
        timeout_ep = Episode(seed, False, 0, 0.0, error=f"timeout: {err}", timed_out=True)
        return _recorded(timeout_ep, record, "", truncated=True)


def _play(env: EnvLike, policy: Policy, seed: int, max_steps: int | None, record: Trajectory | None) -> Episode:
    if isinstance(env, HostedEnv) and record is None and policy.name in ("random", "oracle", "constant"):
        return _play_hosted(env, policy.name, seed, max_steps)

    def start(answer: Any) -> None:
        obs, info = answer
        if record is not None:
            record.seed, record.complexity = seed, int(info.get("complexity", record.complexity))
        policy.begin(env, seed, obs)

    tally: list[Any] = [0, 0.0]  # turns and total reward, counted as each step arrives

    def turn(obs: str, action: str, res: StepResult) -> None:
        if record is not None:
            record.turns.append(Turn(obs, action, res.reward, dict(res.info)))
        tally[0] += 1
        tally[1] += res.reward

    played = play(env, policy.act, seed=seed, max_steps=max_steps, on_start=start, on_step=turn)
    turns, total = tally
    obs = played.steps[-1].observation if played.steps else _first_observation(played.start)
    if played.error is not None:
        ep = Episode(seed, False, turns, total, error=describe_error(played.error))
    elif played.done:
        last = played.steps[-1]
        ep = Episode(seed, played.success, turns, total)
        return _recorded(ep, record, obs, truncated=last.truncated and not last.terminated)
    else:
        ep = Episode(seed, False, turns, total, error=f"episode did not end within {played.max_steps} steps")
    return _recorded(ep, record, obs, truncated=True)


def _first_observation(start: Any) -> str:
    """The observation of a reset's answer, or "" when the answer is not an (observation, info) pair."""
    try:
        obs, _info = start
    except (TypeError, ValueError):
        return ""
    return obs


def _play_hosted(env: HostedEnv, policy: str, seed: int, max_steps: int | None) -> Episode:
    """`_play` of a scripted policy in one request to the env's host (the same episode, fewer round trips)."""
    try:
        return _judged(env, env.play(policy, seed=seed, limit=max_steps), seed, max_steps)
    except Exception as err:
        return Episode(seed, False, 0, 0.0, error=describe_error(err))


def _hosted_episodes(
    env: HostedEnv, policy: str, seeds: Sequence[int], max_steps: int | None, timeout: float | None
) -> list[Episode]:
    """`run_episodes` of a scripted policy, judged here like `_play` judges: all seeds in one request
    (`HostedEnv.plays`: the host ends an episode at `timeout` and plays no more), bounded here by the sum of the
    episodes' deadlines, so an env that ignores the alarms of its own process still has its host killed. Without
    a `timeout`, or when the batch fails, one request per episode, each under its own deadline here."""
    if timeout is not None and seeds:
        batched = _batched_episodes(env, policy, seeds, max_steps, timeout)
        if batched is not None:
            return batched
    out: list[Episode] = []
    for i, seed in enumerate(seeds):
        try:
            with deadline(timeout, f"episode (seed {seed})"):
                played = env.play(policy, seed=seed, limit=max_steps)
        except CallTimeout as err:  # the host was stopped: the rest of this level is not run
            out.append(Episode(seed, False, 0, 0.0, error=f"timeout: {err}", timed_out=True))
            out += [
                Episode(x, False, 0, 0.0, error=f"not run: seed {seed} of this level timed out") for x in seeds[i + 1 :]
            ]
            break
        except Exception as err:
            out.append(Episode(seed, False, 0, 0.0, error=describe_error(err)))
            continue
        out.append(_judged(env, played, seed, max_steps))
    return out


def _batched_episodes(
    env: HostedEnv,
    policy: str,
    seeds: Sequence[int],
    max_steps: int | None,
    timeout: float,
    actions: Sequence[str | None] | None = None,
) -> list[Episode] | None:
    """`_hosted_episodes` in one request (`actions`: each seed's, for ``constant`` or ``mixed``); None when the
    request failed (the caller replays episode by episode)."""
    acts = list(actions) if actions is not None else [None] * len(seeds)
    try:
        with deadline(timeout * len(seeds), f"{len(seeds)} {policy} episodes (seeds {seeds[0]}..{seeds[-1]})"):
            played = env.plays([(int(s), policy, a) for s, a in zip(seeds, acts, strict=True)], timeout,
                               limit=max_steps)  # fmt: skip
    except CallTimeout as err:  # the host ignored its alarms and was stopped: which seed hung is unknown
        return [Episode(s, False, 0, 0.0, error=f"timeout: {err}", timed_out=True) for s in seeds[:1]] + [
            Episode(s, False, 0, 0.0, error=f"not run: the episodes from seed {seeds[0]} timed out") for s in seeds[1:]
        ]
    except Exception:
        return None
    out: list[Episode] = []
    hung: int | None = None  # the host plays no episode after one that timed out
    for seed, item in zip(seeds, played, strict=True):
        if hung is not None or item is None:
            out.append(Episode(seed, False, 0, 0.0, error=f"not run: seed {hung} of this level timed out"))
        elif item.timed_out:
            hung = seed
            out.append(Episode(seed, False, 0, 0.0, error=f"timeout: {item.error}", timed_out=True))
        else:
            out.append(_judged(env, item, seed, max_steps))
    return out


def _judged(env: HostedEnv, item: Any, seed: int, max_steps: int | None) -> Episode:
    """The `Episode` of a hosted transcript (`gymverse.sandbox.hosted.Played`), judged as `_play` judges."""
    turns, total = 0, 0.0
    try:
        for _, res in item.steps:
            turns += 1
            total += res.reward
            if res.done:
                return Episode(seed, res.info.get("success") is True, turns, total)
        if item.error is not None:
            raise item.error
        limit = max_steps if max_steps is not None else env.max_turns + 1
        return Episode(seed, False, turns, total, error=f"episode did not end within {limit} steps")
    except Exception as err:
        return Episode(seed, False, turns, total, error=describe_error(err))


def _recorded(ep: Episode, record: Trajectory | None, final_observation: str, truncated: bool) -> Episode:
    if record is not None:
        record.success, record.error, record.truncated = ep.success, ep.error, truncated
        record.final_observation = final_observation
        ep.trajectory = record
    return ep


def run_episodes(
    env: EnvLike,
    policy: Policy,
    seeds: Sequence[int],
    max_steps: int | None = None,
    record_as: str | None = None,
    metrics: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> list[Episode]:
    """`run_episode` for each seed on the same env object (reset reseeds it); `record_as` names the env id of
    recorded trajectories (None: record nothing), `metrics` goes into each of them. After an episode times out
    the remaining seeds of this call are not played (one hang costs one `timeout`)."""
    if isinstance(env, HostedEnv) and record_as is None and policy.name in ("random", "oracle", "constant"):
        return _hosted_episodes(env, policy.name, seeds, max_steps, timeout)
    if isinstance(env, HostedEnv) and record_as is None and isinstance(policy, NoisyOraclePolicy) and seeds:
        turns = max_steps if max_steps is not None else SCRIPTED_TURNS
        scripts = [policy.script(s, turns) for s in seeds]
        batched = None if timeout is None else _batched_episodes(env, "mixed", seeds, max_steps, timeout, scripts)
        # an episode that used up its script without ending (longer than SCRIPTED_TURNS) is played live below
        if batched is not None and (max_steps is not None or all(e.turns < turns for e in batched)):
            return batched
    out: list[Episode] = []
    for i, s in enumerate(seeds):
        record = None if record_as is None else Trajectory(record_as, s, 0, metrics=dict(metrics or {}))
        ep = run_episode(env, policy, s, max_steps, record, timeout)
        out.append(ep)
        if ep.timed_out:
            skipped = f"not run: seed {s} of this level timed out"
            out += [Episode(x, False, 0, 0.0, error=skipped) for x in seeds[i + 1 :]]
            break
    return out


__all__ = [
    "ConstantPolicy",
    "Episode",
    "LLMPolicy",
    "NoisyOraclePolicy",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "make_policy",
    "parse_policy_spec",
    "run_episode",
    "run_episodes",
]
