"""The individual checks. Each returns ``(passed, reason)``; exceptions are turned into failures by the runner."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from gymverse import global_rng
from gymverse.checker._support import (
    CountingWrapper,
    Episode,
    TagWrapper,
    first_difference,
    run_episode,
    same,
    short,
    step_record,
)
from gymverse.complexity import LEVELS
from gymverse.conformance import BASE_ATTRS, canon, reward_in_range, step_limit, step_type_problem
from gymverse.core import DOMAINS, Env, EnvMetadata
from gymverse.play import play
from gymverse.protocol import EnvLike
from gymverse.sandbox.hosted import HostedEnv
from gymverse.text import plural

Outcome = tuple[bool, str]
Build = Callable[[int], EnvLike]

#: Malformed actions every env must absorb: empty, unboxed prose, unbalanced box, and a 100 kB string.
MALFORMED_ACTIONS: tuple[str, ...] = ("", "garbage", "\\boxed{", "garbage " * 12_500)
OK: Outcome = (True, "")


class CheckCrash(Exception):
    """The env raised inside a check; carries the original exception and where it happened."""

    def __init__(self, cause: BaseException, context: str) -> None:
        super().__init__(context)
        self.cause = cause
        self.context = context


def _episode_crash(ep: Episode, what: str) -> CheckCrash:
    assert ep.error is not None
    return CheckCrash(ep.error, f"{what}, turn {len(ep.steps) + 1}")


def _label(action: str) -> str:
    return short(action, 24) + (f" ({len(action)} chars)" if len(action) > 24 else "")


def _describe_end(ep: Episode) -> str:
    if not ep.steps:
        return "no step was taken"
    last = ep.steps[-1]
    state = "terminated" if last[2] else "truncated" if last[3] else "still running"
    return f"{state} after {plural(len(ep.steps), 'step')} with success={last[4].get('success')!r}"


# ---------------------------------------------------------------------------------------------- class-level checks
def check_metadata(env: EnvLike, env_id: str | None) -> Outcome:
    """Metadata is complete and consistent (and matches the registry family)."""
    md = getattr(env, "metadata", None)
    if not isinstance(md, EnvMetadata):
        return False, f"{type(env).__name__}.metadata is {type(md).__name__}, expected EnvMetadata"
    problems = []
    for name in ("name", "family", "description", "action_format"):
        value = getattr(md, name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{name} is empty")
    if md.domain not in DOMAINS:
        problems.append(f"domain {md.domain!r} is not one of {', '.join(DOMAINS)}")
    if isinstance(md.max_turns, bool) or not isinstance(md.max_turns, int) or md.max_turns < 1:
        problems.append(f"max_turns must be a positive int, got {md.max_turns!r}")
    rr = md.reward_range
    if not (isinstance(rr, tuple | list) and len(rr) == 2 and all(isinstance(v, int | float) for v in rr)):
        problems.append(f"reward_range must be (low, high), got {rr!r}")
    elif not (math.isfinite(rr[0]) and math.isfinite(rr[1]) and rr[0] < rr[1]):
        problems.append(f"reward_range {rr!r} must be finite with low < high")
    elif not rr[0] <= env.format_penalty <= rr[1]:
        problems.append(f"format_penalty {env.format_penalty} lies outside reward_range {tuple(rr)}")
    if env_id is not None and md.family != env_id.split(":", 1)[0]:
        problems.append(f"metadata.family {md.family!r} differs from the id's family in {env_id!r}")
    return (False, "; ".join(problems)) if problems else OK


def check_complexity_params(env: EnvLike) -> Outcome:
    """Params are declared, valid, change between levels 1 and 10, and numeric ones are monotone in the level."""
    spec = env.complexity_spec()
    if not spec.params:
        return False, "no complexity_params declared: the complexity knob controls nothing"
    if any(not isinstance(v, int | float) or v < 0 for v in spec.variance.values()):
        return False, f"param_variance values must be non-negative numbers, got {dict(spec.variance)}"
    table = spec.table()
    problems, desc = [], []
    for name in spec.params:
        values = [table[lvl][name] for lvl in LEVELS]
        desc.append(f"{name} {short(values[0], 20)}→{short(values[-1], 20)}")
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric:
            if not all(math.isfinite(v) for v in values):
                problems.append(f"{name} has non-finite values")
            rising = all(a <= b for a, b in itertools.pairwise(values))
            falling = all(a >= b for a, b in itertools.pairwise(values))
            if not (rising or falling):
                problems.append(f"{name} is not monotone over levels 1..10: {values}")
        if name == "max_turns" and not all(isinstance(v, int) and v >= 1 for v in values):
            problems.append(f"max_turns must be a positive int at every level: {values}")
    if table[LEVELS[0]] == table[LEVELS[-1]]:
        problems.append("every param has the same value at levels 1 and 10")
    return (False, "; ".join(problems)) if problems else (True, ", ".join(desc))


# ---------------------------------------------------------------------------------------- per (level, seed) checks
def check_construct(env: EnvLike, level: int) -> Outcome:
    """The factory built an Env at the requested level."""
    if env.complexity != level:
        return False, f"built at complexity {env.complexity}, requested {level}"
    return OK


def check_reset(env: EnvLike, seed: int, level: int) -> Outcome:
    """reset(seed) returns (non-empty str, dict) and reports the level."""
    out = env.reset(seed=seed)
    if not isinstance(out, tuple) or len(out) != 2:
        return False, f"reset() returned {short(out, 60)}, expected (observation, info)"
    obs, info = out
    if not isinstance(obs, str) or not obs.strip():
        return False, f"first observation is {short(obs, 60)}, expected a non-empty str"
    if not isinstance(info, dict):
        return False, f"reset info is {type(info).__name__}, expected dict"
    if info.get("complexity") != level:
        return False, f"reset info['complexity'] is {info.get('complexity')!r}, expected {level}"
    return OK


def random_episode_checks(env: EnvLike, seed: int, max_steps: int | None) -> dict[str, Outcome]:
    """One random-action episode, judged for step types, reward range and termination."""
    env.reset(seed=seed)
    ep = run_episode(env, step_limit(env, max_steps), "random")
    out: dict[str, Outcome] = {}
    type_issue = next((p for p in map(step_type_problem, ep.steps) if p), None)
    if ep.error is not None:
        raise _episode_crash(ep, "random episode")
    out["step_types"] = (False, f"turn {len(ep.steps)}: {type_issue}") if type_issue else OK
    budget = env.max_turns
    # The oracle episode covers the success reward, which random play rarely reaches; its errors are
    # reported by the oracle check, so only its rewards matter here.
    env.reset(seed=seed)
    oracle = run_episode(env, step_limit(env, max_steps), "oracle")
    low, high = env.metadata.reward_range
    bad = [
        (kind, i + 1, s[1])
        for kind, e in (("random", ep), ("oracle", oracle))
        for i, s in enumerate(e.steps)
        if step_type_problem(s) is None and not reward_in_range(float(s[1]), low, high)
    ]
    out["reward_range"] = (
        (False, f"reward {bad[0][2]!r} at turn {bad[0][1]} of the {bad[0][0]} episode is outside {(low, high)}")
        if bad
        else OK
    )
    if not ep.done:
        out["episode_ends"] = (
            False,
            f"episode still running after {plural(len(ep.steps), 'step')} (max_turns={budget})",
        )
    elif len(ep.steps) > budget:
        out["episode_ends"] = (False, f"episode ended after {plural(len(ep.steps), 'step')}, beyond max_turns={budget}")
    elif not isinstance(ep.steps[-1][4].get("success"), bool):
        out["episode_ends"] = (False, "info['success'] is not a bool at episode end")
    else:
        out["episode_ends"] = OK
    return out


def check_oracle(env: EnvLike, seed: int, max_steps: int | None) -> Outcome:
    """The oracle reaches ``info["success"] is True`` without a format error."""
    env.reset(seed=seed)
    ep = run_episode(env, step_limit(env, max_steps), "oracle")
    if ep.error is not None:
        raise _episode_crash(ep, "oracle episode")
    for i, (action, res) in enumerate(zip(ep.actions, ep.steps)):
        if res[4].get("format_error"):
            return False, f"oracle action {short(action, 40)} at turn {i + 1} was rejected as malformed"
    if not ep.done or ep.steps[-1][4].get("success") is not True:
        return False, f"oracle did not succeed: {_describe_end(ep)}"
    return OK


def check_determinism(build: Build, level: int, seed: int, max_steps: int | None) -> Outcome:
    """Two fresh instances with one seed and one action sequence give identical transcripts."""
    a, b = build(level), build(level)
    if isinstance(a, HostedEnv) and isinstance(b, HostedEnv):
        from gymverse.checker._replay import OffScript, replayed_pair

        try:  # one request for the whole lockstep, judged here as the live calls would be
            return _determinism(*replayed_pair(a, b, seed, max_steps), seed, max_steps)
        except OffScript:
            a, b = build(level), build(level)
    return _determinism(a, b, seed, max_steps)


def _determinism(a: Any, b: Any, seed: int, max_steps: int | None) -> Outcome:
    obs_a, info_a = a.reset(seed=seed)
    obs_b, info_b = b.reset(seed=seed)
    first_a, first_b = canon([obs_a, info_a]), canon([obs_b, info_b])
    if not same(first_a, first_b):
        what = "observation" if first_a[0] != first_b[0] else "reset info"
        return False, f"first {what} differs between two instances: {first_difference(first_a, first_b)}"
    trans_a: list[Any] = []
    trans_b: list[Any] = []
    for _ in range(step_limit(a, max_steps)):
        act_a, act_b = a.sample_random_action(), b.sample_random_action()
        if act_a != act_b:
            return False, f"sample_random_action differs at turn {len(trans_a) + 1}: {short(act_a)} != {short(act_b)}"
        ra, rb = a.step(act_a), b.step(act_a)
        trans_a.append(step_record(ra, act_a))
        trans_b.append(step_record(rb, act_a))
        if not same(trans_a[-1], trans_b[-1]):
            return False, f"transcripts diverge at turn {len(trans_a)}: {first_difference(trans_a, trans_b)}"
        if ra[2] or ra[3] or rb[2] or rb[3]:
            break
    again = canon(list(a.reset(seed=seed)))
    if not same(again, first_a):
        return (
            False,
            f"reset(seed={seed}) on a used instance differs from the first: {first_difference(first_a, again)}",
        )
    return OK


def recorded(check: Callable[[Any, int], Any], name: str, build: Build, level: int, seed: int, calls: int) -> Any:
    """``check(build(level), seed)``; for a hosted env its calls are made in the host in one request and the check
    runs here against that record (`gymverse.checker._replay`), on a fresh live env when the record goes off it."""
    env = build(level)
    if isinstance(env, HostedEnv):
        from gymverse.checker._replay import OffScript, replayed

        try:
            return check(replayed(env, name, seed, calls), seed)
        except OffScript:
            env = build(level)
    return check(env, seed)


def check_malformed(env: EnvLike, seed: int) -> Outcome:
    """Each malformed action yields a format error with the format penalty, never an exception."""
    env.reset(seed=seed)
    penalty = float(env.format_penalty)
    for action in MALFORMED_ACTIONS:
        if env.done:
            env.reset(seed=seed)
        try:
            res = env.step(action)
        except Exception as err:
            raise CheckCrash(err, f"step({_label(action)})") from err
        if res[4].get("format_error") is not True:
            return False, f"step({_label(action)}) did not set info['format_error'] (reward {res[1]!r})"
        if not math.isclose(float(res[1]), penalty, abs_tol=1e-9):
            return False, f"step({_label(action)}) gave reward {res[1]!r}, expected format_penalty {penalty}"
    return OK


def _advance(env: EnvLike, seed: int, turns: int) -> None:
    """Reset, then take up to `turns` random steps without ending the episode (replaying if one would end it)."""
    env.reset(seed=seed)
    taken: list[str] = []
    for _ in range(turns):
        action = env.sample_random_action()
        res = env.step(action)
        if res[2] or res[3]:
            env.reset(seed=seed)
            for prev in taken:
                env.step(prev)
            return
        taken.append(action)


def _continue(env: EnvLike, actions: list[str] | None, limit: int) -> tuple[list[str], list[Any]]:
    """Take `limit` steps (random, or replaying `actions`) and record sampled actions plus results."""
    sampled: list[str] = []

    def act(e: Env, _obs: str) -> str:  # samples every turn, replaying too: the env's RNG moves as it did live
        sampled.append(e.sample_random_action())
        return sampled[-1] if actions is None else actions[len(sampled) - 1]

    played = play(env, act, reset=False, max_steps=limit if actions is None else len(actions)).reraise()
    record = [[s, step_record(res, a)] for s, a, res in zip(sampled, played.actions, played.steps)]
    return played.actions, record


def state_checks(env: EnvLike, seed: int) -> dict[str, Outcome]:
    """get_state/set_state and clone() reproduce the continuation of a mid-episode snapshot."""
    _advance(env, seed, 2)
    snapshot = env.get_state()
    twin = env.clone()
    actions, original = _continue(env, None, 3)
    out: dict[str, Outcome] = {}
    env.set_state(snapshot)
    _, restored = _continue(env, actions, 0)
    out["state_roundtrip"] = (
        OK if same(restored, original) else (False, f"after set_state: {first_difference(original, restored)}")
    )
    if twin is env or type(twin) is not type(env):
        out["clone"] = (False, f"clone() returned {short(twin, 60)}, not an independent {type(env).__name__}")
    else:
        _, cloned = _continue(twin, actions, 0)
        out["clone"] = (
            OK if same(cloned, original) else (False, f"clone diverges: {first_difference(original, cloned)}")
        )
    return out


def check_global_rng(build: Build, level: int, seed: int, max_steps: int | None) -> Outcome:
    """Building, resetting, random play and oracle play leave the global `random`/`numpy.random` untouched."""
    # A hosted env's globals live in its own process and the host compares them there; an in-process env's are
    # this process's, judged so that other threads' envs swapping their private states in are not taken for it.
    with global_rng.judging() as moved:
        env = build(level)
        env.reset(seed=seed)
        limit = step_limit(env, max_steps)
        run_episode(env, limit, "random")
        env.reset(seed=seed)
        run_episode(env, limit, "oracle")
        changed = env.global_rng_changes() if isinstance(env, HostedEnv) else moved()
    if changed:
        names = " and ".join(f"global `{c}`" for c in changed)
        return False, f"the env changed the state of {names}; draw from self.rng instead"
    return OK


# ---------------------------------------------------------------------------------------------- cross-level checks
def check_wrapper_complexity(build: Build, low: int, high: int, seed: int) -> Outcome:
    """set_complexity on a wrapper stack reaches the base env at the next reset, same as building at that level."""
    base = build(low)
    counter = CountingWrapper(base)
    stack = TagWrapper(counter)
    stack.reset(seed=seed)
    stack.step(stack.sample_random_action())
    stack.set_complexity(high)
    obs, info = stack.reset(seed=seed)
    if stack.unwrapped is not base.unwrapped:  # a wrapper-stack target has its own base
        return False, "Wrapper.unwrapped does not return the base env"
    if counter.resets != 2 or counter.steps != 1 or info.get("checker_wrapped") is not True:
        return False, "calls did not pass through the wrapper stack"
    if base.complexity != high or info.get("complexity") != high:
        return False, f"base env is at complexity {base.complexity} (info says {info.get('complexity')!r}), not {high}"
    ref = build(high)
    ref_obs, _ = ref.reset(seed=seed)
    if canon(base.params) != canon(ref.params):
        return False, f"after set_complexity({high}) via wrappers the params differ from an env built at {high}"
    # Observations are only comparable for a deterministic env; the determinism check reports the rest.
    if obs != ref_obs and build(high).reset(seed=seed)[0] == ref_obs:
        return False, f"after set_complexity({high}) via wrappers the instance differs from one built at {high}"
    return OK


def instance_fingerprint(env: EnvLike, seed: int) -> Any:
    """The first observation, turn budget and generated state of `env` after reset(seed)."""
    obs, _ = env.reset(seed=seed)
    if isinstance(env, HostedEnv):  # its attributes live in its host process, which canonicalizes them there
        return canon([obs, env.max_turns, env.instance_state()])
    state = {k: v for k, v in vars(env).items() if k not in BASE_ATTRS}
    return canon([obs, env.max_turns, state])


def check_complexity_effect(build: Build, low: int, high: int, seeds: tuple[int, ...]) -> Outcome:
    """Levels `low` and `high` generate different instances for at least one seed."""
    for seed in seeds:
        if instance_fingerprint(build(low), seed) != instance_fingerprint(build(high), seed):
            return OK
    seeds_txt = ", ".join(map(str, seeds))
    return False, (
        f"levels {low} and {high} generate identical instances (first observation, max_turns and state) for "
        f"seeds {seeds_txt}: the complexity params are not used"
    )
