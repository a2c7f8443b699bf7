"""`check_env`: run every check over levels × seeds and collect a `CheckReport`; never raises on a broken env."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gymverse.checker import checks as C
from gymverse.checker.report import CheckReport, CheckResult, crash_result
from gymverse.checker.target import CheckTargetError, resolve_target
from gymverse.complexity import MAX_LEVEL, MIN_LEVEL, check_level
from gymverse.protocol import EnvLike

#: Check names in run order (per level × seed ones in the middle).
GLOBAL_CHECKS = ("metadata", "complexity_params")
EPISODE_CHECKS = (
    "construct",
    "reset",
    "step_types",
    "reward_range",
    "episode_ends",
    "oracle",
    "determinism",
    "malformed_actions",
    "state_roundtrip",
    "clone",
    "global_rng",
)
CROSS_LEVEL_CHECKS = ("wrapper_complexity", "complexity_effect")
CHECK_NAMES: tuple[str, ...] = GLOBAL_CHECKS + EPISODE_CHECKS + CROSS_LEVEL_CHECKS

OnResult = Callable[[CheckResult], None]


class _Run:
    """Accumulates results, timing each check and turning exceptions into failed results."""

    def __init__(self, report: CheckReport, on_result: OnResult | None) -> None:
        self.report = report
        self.on_result = on_result

    def add(self, result: CheckResult) -> None:
        self.report.results.append(result)
        if self.on_result is not None:
            self.on_result(result)

    def one(self, name: str, fn: Callable[[], C.Outcome], level: int | None = None, seed: int | None = None) -> bool:
        """Run a single-outcome check; returns whether it passed."""
        return self.many((name,), lambda: {name: fn()}, level, seed)

    def many(
        self,
        names: tuple[str, ...],
        fn: Callable[[], dict[str, C.Outcome]],
        level: int | None = None,
        seed: int | None = None,
    ) -> bool:
        """Run a check producing several named outcomes (e.g. one episode judged three ways)."""
        start = time.perf_counter()
        results: list[CheckResult]
        try:
            outcomes = fn()
            results = [CheckResult(n, outcomes[n][0], outcomes[n][1], level, seed) for n in names]
        except C.CheckCrash as err:
            first = crash_result(names[0], err.cause, level, seed, context=err.context)
            rest = [
                CheckResult(n, False, f"not judged: {err.context} raised", level, seed, status="not_judged")
                for n in names[1:]
            ]
            results = [first, *rest]
        except (Exception, SystemExit) as err:  # an env calling sys.exit() must not end the checker
            results = [crash_result(n, err, level, seed) for n in names]
        elapsed = (time.perf_counter() - start) / len(names)
        for r in results:
            r.seconds = round(elapsed, 6)
            self.add(r)
        return all(r.passed for r in results)

    def skip(self, names: Iterable[str], why: str, level: int | None = None, seed: int | None = None) -> None:
        for n in names:
            self.add(CheckResult(n, False, f"skipped: {why}", level, seed, status="skipped"))


def _levels(levels: Iterable[int]) -> tuple[int, ...]:
    out = tuple(dict.fromkeys(check_level(lv) for lv in levels))
    if not out:
        raise ValueError("levels must name at least one complexity level")
    return out


def _seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    out = tuple(seeds)
    if not out or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in out):
        raise ValueError(f"seeds must be non-negative integers (at least one), got {out!r}")
    return out


def _span(levels: tuple[int, ...]) -> tuple[int, int]:
    """The two levels to compare: lowest and highest requested, or the opposite end when only one is given."""
    low, high = min(levels), max(levels)
    if low == high:
        return (low, MAX_LEVEL) if low != MAX_LEVEL else (MIN_LEVEL, low)
    return low, high


class _Builder:
    """Builds envs for the checks and remembers them, so each block of checks can close what it opened."""

    def __init__(self, build: C.Build) -> None:
        self._build = build
        self._open: list[EnvLike] = []

    def __call__(self, level: int) -> EnvLike:
        env = self._build(level)
        self._open.append(env)
        return env

    def close_all(self) -> None:
        for env in self._open:
            with contextlib.suppress(Exception):  # a failing close() must not hide the check results
                env.close()
        self._open.clear()


def _episode_checks(run: _Run, build: _Builder, level: int, seed: int, max_steps: int | None) -> None:
    holder: list[EnvLike] = []

    def construct() -> C.Outcome:
        holder.append(build(level))
        return C.check_construct(holder[0], level)

    if not run.one("construct", construct, level, seed):
        run.skip(EPISODE_CHECKS[1:], "construct failed", level, seed)
        return
    env = holder[0]
    if not run.one("reset", lambda: C.check_reset(env, seed, level), level, seed):
        run.skip(EPISODE_CHECKS[2:], "reset failed", level, seed)
        return
    run.many(
        ("step_types", "reward_range", "episode_ends"),
        lambda: C.random_episode_checks(env, seed, max_steps),
        level,
        seed,
    )
    run.one("oracle", lambda: C.check_oracle(build(level), seed, max_steps), level, seed)
    run.one("determinism", lambda: C.check_determinism(build, level, seed, max_steps), level, seed)
    # a hosted env answers these from one request each (`checks.recorded`)
    bad = 4 * len(C.MALFORMED_ACTIONS)
    run.one("malformed_actions", functools.partial(C.recorded, C.check_malformed, "malformed", build, level, seed, bad),
            level, seed)  # fmt: skip
    run.many(("state_roundtrip", "clone"), functools.partial(C.recorded, C.state_checks, "state_checks", build,
                                                             level, seed, 40), level, seed)  # fmt: skip
    run.one("global_rng", lambda: C.check_global_rng(build, level, seed, max_steps), level, seed)


def check_env(
    target: object,
    *,
    levels: Iterable[int] = (1, 5, 10),
    seeds: Iterable[int] = (0, 1, 2),
    max_steps: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    on_result: OnResult | None = None,
    env_id: str | None = None,
) -> CheckReport:
    """Check an env class, factory, registered id, ``file.py[:Class]`` or ``pkg.mod:Class`` at levels × seeds.

    `env_id`: the registered id a factory builds (e.g. a `gymverse.sandbox.hosted.EnvHost` hosting it), so the
    metadata check compares families as it does for an id target.
    """
    lv, sd = _levels(levels), _seeds(seeds)
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be a positive int or None, got {max_steps!r}")
    tgt = resolve_target(target, env_kwargs)
    tgt.env_id = tgt.env_id or env_id
    started = time.perf_counter()
    report = CheckReport(tgt.label, meta={"levels": list(lv), "seeds": list(sd), "max_steps": max_steps})
    run = _Run(report, on_result)

    build = _Builder(tgt.build)
    try:
        env = build(lv[0])
        report.meta["env_class"] = f"{type(env).__module__}:{type(env).__qualname__}"
        report.meta["env_name"] = str(getattr(getattr(type(env), "metadata", None), "name", type(env).__name__))
    except (Exception, SystemExit) as err:
        for name in GLOBAL_CHECKS:
            run.add(crash_result(name, err, context="constructing the env"))
    else:
        run.one("metadata", lambda: C.check_metadata(env, tgt.env_id))
        run.one("complexity_params", lambda: C.check_complexity_params(env))
    build.close_all()
    for level in lv:
        for seed in sd:
            _episode_checks(run, build, level, seed, max_steps)
            build.close_all()
    low, high = _span(lv)
    for seed in sd:
        run.one("wrapper_complexity", functools.partial(C.check_wrapper_complexity, build, low, high, seed), high, seed)
    run.one("complexity_effect", lambda: C.check_complexity_effect(build, low, high, sd))
    build.close_all()
    report.meta["seconds"] = round(time.perf_counter() - started, 4)
    return report


__all__ = ["CHECK_NAMES", "CheckTargetError", "check_env"]
