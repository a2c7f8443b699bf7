"""Env-contract checks shared by the test suites of the built-in env families (not public API).

Each ``check_*`` function asserts one property every built-in env must have; the test files keep the
per-family parts (ids, wrong answers, golden rules) and call these for the rest. ``tests/conftest.py`` registers
this module for pytest's assertion rewriting, so failures show the compared values.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from gymverse.core import Env, StepResult, run_oracle
from gymverse.play import play
from gymverse.protocol import EnvLike
from gymverse.registry import make

#: Malformed for every built-in env: no box, empty box, unknown verb, huge input, non-ASCII verb.
MALFORMED_ACTIONS = [
    "no box here",
    r"\boxed{}",
    r"\boxed{hello world}",
    "x" * 5_000_000,
    "\\boxed{\u00e9\u00e9 \u2603}",
]
#: The reward of a format-error step (the core `format_penalty`).
FORMAT_PENALTY = -0.1


def run_actions(env: EnvLike, actions: Sequence[str]) -> list[tuple[Any, ...]]:
    """Step `actions` until the episode ends; a comparable record of every step."""
    out: list[tuple[Any, ...]] = []
    for a in actions:
        res = env.step(a)
        out.append(tuple(res))
        if res.done:
            break
    return out


def seeded_transcript(env: EnvLike, seed: int, actions: Sequence[str]) -> list[tuple[Any, ...]]:
    """Observation, reward and flags of every step of `actions` after `reset(seed)` (stops at episode end)."""
    obs, _ = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs,)]
    for a in actions:
        r = env.step(a)
        out.append((r.observation, r.reward, r.terminated, r.truncated, r.info.get("success")))
        if r.done:
            break
    return out


def clone_mixed_actions(env: EnvLike, n: int) -> list[str]:
    """Alternating oracle and random actions played on a clone, so the episode covers both paths."""
    probe = env.clone()
    acts: list[str] = []
    for i in range(n):
        a = probe.sample_random_action() if i % 2 else probe.solve()
        acts.append(a)
        if probe.step(a).done:
            break
    return acts


def live_mixed_actions(env: EnvLike, seed: int, n: int, submit_as: str | None = None) -> list[str]:
    """Alternating oracle and random actions chosen live after `reset(seed)`.

    With `submit_as`, a random action that would submit is replaced by it, so the episode does not end early.
    """
    env.reset(seed=seed)
    actions = []
    for t in range(n):
        a = env.sample_random_action() if t % 2 else env.solve()
        if submit_as is not None and "submit" in a:
            a = submit_as
        actions.append(a)
        if env.step(a).done:
            break
    return actions


def play_baseline(env: EnvLike, policy: str, seed: int) -> bool:
    """Success of one episode of the ``random`` policy, or of repeating one fixed action (``constant``: a random
    one, ``first-oracle``: the oracle's first move)."""
    fixed: list[str] = []  # drawn right after reset for every policy, so the env's RNG moves the same way

    def act(e: Env, _obs: str) -> str:
        return e.sample_random_action() if policy == "random" else fixed[0]

    def start(_answer: Any) -> None:
        fixed.append(env.solve() if policy == "first-oracle" else env.sample_random_action())

    played = play(env, act, seed=seed, on_start=start).reraise()
    assert played.done, f"{policy} episode (seed {seed}) did not end within {played.max_steps} steps"
    return bool(played.steps[-1].info["success"])


def check_oracle_solves(env: EnvLike, seed: int) -> list[StepResult]:
    """The oracle wins the episode of `seed` with reward 1 and no format error; returns its steps."""
    steps = run_oracle(env, seed=seed)
    assert steps[-1].info["success"] is True
    assert steps[-1].reward == 1.0
    assert not any(s.info["format_error"] for s in steps)
    return steps


def check_random_actions_handled(env_id: str) -> None:
    """Every grammar verb has a handler, and random actions are never format errors at levels 1 and 10."""
    env = make(env_id)
    for verb in env.grammar.verbs:  # type: ignore[attr-defined]
        assert callable(getattr(env, "_do_" + verb, None)), verb
    for level in (1, 10):
        env.set_complexity(level)
        env.reset(seed=level)
        for _ in range(150):
            res = env.step(env.sample_random_action())
            assert res.info["format_error"] is False, res.observation
            if res.done:
                env.reset()


def check_levels_change_instances_and_horizon(env_id: str) -> None:
    """Level 10 gives other instances and params than level 1, and longer oracle episodes."""
    low, high = make(env_id, complexity=1), make(env_id, complexity=10)
    assert low.reset(seed=3)[0] != high.reset(seed=3)[0]
    assert low.params != high.params
    steps_low = sum(len(run_oracle(make(env_id, complexity=1), seed=s)) for s in range(6))
    steps_high = sum(len(run_oracle(make(env_id, complexity=10), seed=s)) for s in range(6))
    assert steps_high > steps_low


def check_format_errors(env: EnvLike, actions: Sequence[str], reset_seed: int | None = None) -> None:
    """Each of `actions` is a format error with the format penalty; the episode goes on.

    With `reset_seed`, an episode may end (its turn budget spent on errors) and is then reset with that seed.
    """
    import pytest  # test-only dependency; this module is only imported by tests

    for text in actions:
        res = env.step(text)
        assert res.info["format_error"] is True, text[:40]
        assert res.reward == pytest.approx(FORMAT_PENALTY)
        assert "Invalid action" in res.observation
        if reset_seed is None:
            assert not res.done
        elif res.done:
            env.reset(seed=reset_seed)


def check_malformed_actions(env_id: str, actions: Sequence[str]) -> None:
    """`MALFORMED_ACTIONS` and the family's own bad `actions` are format errors at level 5; the oracle still wins."""
    env = make(env_id, complexity=5, max_turns=100)
    env.reset(seed=0)
    check_format_errors(env, [*MALFORMED_ACTIONS, *actions])
    assert run_oracle(env.clone(), seed=0)[-1].info["success"] is True


def check_same_seed_same_transcript(env_id: str, levels: Sequence[int]) -> None:
    """At each level two envs with one seed replay mixed actions identically; another seed is another instance."""
    for level in levels:
        a, b = make(env_id, complexity=level), make(env_id, complexity=level)
        assert a.reset(seed=11) == b.reset(seed=11)
        acts = clone_mixed_actions(a, 12)
        assert run_actions(a, acts) == run_actions(b, acts)
        assert [tuple(r) for r in run_oracle(a, seed=12)] != [tuple(r) for r in run_oracle(b, seed=11)]


def check_live_transcripts_repeat(env_id: str, level: int, submit_as: str | None = None) -> None:
    """Seed 7's mixed live actions (`live_mixed_actions`) and their transcript repeat exactly; seed 8 differs."""
    acts = live_mixed_actions(make(env_id, complexity=level), 7, 12, submit_as=submit_as)
    assert acts == live_mixed_actions(make(env_id, complexity=level), 7, 12, submit_as=submit_as)
    first = seeded_transcript(make(env_id, complexity=level), 7, acts)
    assert first == seeded_transcript(make(env_id, complexity=level), 7, acts)
    assert first != seeded_transcript(make(env_id, complexity=level), 8, acts), "another seed, another instance"


def check_wrong_answer_ends_episode(env_id: str, wrong_answer: Callable[[Any], str]) -> StepResult:
    """The answer `wrong_answer(env)` (well-formed, wrong for the hidden state) ends the episode unsolved."""
    env = make(env_id, complexity=4)
    env.reset(seed=5)
    res = env.step(wrong_answer(env))
    assert res.terminated
    assert res.info["success"] is False
    assert res.reward == 0.0
    return res


def check_baseline_fails(env_id: str, policy: str, levels: Sequence[int] = (5, 10)) -> None:
    """The `play_baseline` `policy` wins at most one of 20 seeded episodes at each of `levels`."""
    for level in levels:
        env = make(env_id, complexity=level)
        wins = sum(play_baseline(env, policy, seed) for seed in range(20))
        assert wins <= 1, (level, wins)


def check_clone_and_state_replay(env_id: str) -> None:
    """Mid-episode, a clone and a restored `get_state` snapshot replay the same transcript as the original."""
    env = make(env_id, complexity=6)
    env.reset(seed=7)
    for _ in range(2):
        env.step(env.solve())
    twin, snapshot = env.clone(), env.get_state()
    acts = clone_mixed_actions(env, 10)
    first = run_actions(env, acts)
    assert run_actions(twin, acts) == first
    env.set_state(snapshot)
    assert run_actions(env, acts) == first


def check_pickled_clone_and_rewind(env: EnvLike, odd_action: str | None = None) -> None:
    """A pickled clone steps like `env` (same oracle moves and results), and a rewound snapshot replays them.

    Even steps play the oracle; odd steps play `odd_action`, or a random action when it is None.
    """
    twin = pickle.loads(pickle.dumps(env.clone()))  # must also survive a trip to a worker process
    snapshot = env.get_state()
    actions, results = [], []
    for i in range(8):
        assert twin.solve() == env.solve()
        if i % 2 == 0:
            a = env.solve()
        elif odd_action is None:
            a = env.sample_random_action()
        else:
            a = odd_action
        actions.append(a)
        r1, r2 = env.step(a), twin.step(a)
        assert r1[:4] == r2[:4]
        results.append(r1[:4])
        if r1.done:
            break
    env.set_state(snapshot)  # rewinding replays the same branch
    assert [env.step(a)[:4] for a in actions] == results
