"""The sandboxed half of validation: load the program, run the core checker, then the degeneracy policies.

Runs inside `gymverse.sandbox` (one fresh, limited process per program). Progress goes to stdout as one
``@@gv {json}`` line per finished check or started episode, flushed at once, so when the sandbox kills a hung job
the parent can still say which check was running. Anything the program prints is diverted to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import IO, Any

PROGRESS = "@@gv "


class _OutOfMemory(Exception):
    def __init__(self, result: Any) -> None:
        super().__init__(result.reason)
        self.result = result


def _emitter(stream: IO[str]) -> Callable[[dict[str, Any]], None]:
    def emit(event: dict[str, Any]) -> None:
        stream.write(PROGRESS + json.dumps(event) + "\n")
        stream.flush()

    return emit


def _episode(env: Any, seed: int, act: Callable[[Any], str], max_steps: int | None) -> bool:
    env.reset(seed=seed)
    limit = max_steps if max_steps is not None else env.max_turns + 1
    for _ in range(limit):
        res = env.step(act(env))
        if res.terminated or res.truncated:
            return res.info.get("success") is True
    return False


def _constant(text: str) -> Callable[[Any], str]:
    return lambda env: text


def _random_action(env: Any) -> str:
    return str(env.sample_random_action())


def _degeneracy(
    cls: Any,
    levels: list[int],
    seeds: list[int],
    max_rate: float,
    max_steps: int | None,
    emit: Callable[[dict[str, Any]], None],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Success rates of a constant and a random policy per level; a rate above `max_rate` is a failure."""
    rates: dict[str, Any] = {}
    failures: list[dict[str, Any]] = []
    for level in levels:
        probe = cls(complexity=level)
        probe.reset(seed=seeds[0])
        # one fixed text for every state and seed: what an agent that ignores observations would send
        constant = str(probe.sample_random_action())
        policies: dict[str, Callable[[Any], str]] = {"constant": _constant(constant), "random": _random_action}
        for name, act in policies.items():
            wins = 0
            for seed in seeds:
                emit({"phase": "degeneracy", "policy": name, "level": level, "seed": seed})
                try:
                    wins += _episode(cls(complexity=level), seed, act, max_steps)
                except Exception as err:
                    reason = f"a {name} policy episode raised {type(err).__name__}: {str(err)[:300]}"
                    failures.append(
                        {
                            "stage": "degeneracy",
                            "check": "degenerate_crash",
                            "reason": reason,
                            "level": level,
                            "seed": seed,
                        }
                    )
                    break
            rate = wins / len(seeds)
            rates[f"{name}@{level}"] = rate
            if rate > max_rate:
                what = f"the constant action {constant[:60]!r}" if name == "constant" else "uniformly random actions"
                reason = (
                    f"{what} succeeded in {wins}/{len(seeds)} episodes at level {level} (limit {max_rate:.0%}): "
                    "the task can be won without solving it"
                )
                failures.append(
                    {"stage": "degeneracy", "check": f"degenerate_{name}", "reason": reason, "level": level}
                )
    return rates, failures


def run_job(
    source: str,
    levels: list[int],
    seeds: list[int],
    degeneracy_levels: list[int],
    degeneracy_seeds: list[int],
    degeneracy_max_rate: float,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Check the program `source`; returns JSON: load error, or checker report + degeneracy rates and failures."""
    from gymverse.checker import check_env
    from gymverse.loader import EnvLoadError, load_env_class

    emit = _emitter(sys.stdout)
    fd, path = tempfile.mkstemp(suffix=".py", prefix="synth_env_", dir=os.environ.get("TMPDIR"))
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(source)
    with contextlib.redirect_stdout(sys.stderr):
        try:
            cls = load_env_class(path)
        except EnvLoadError as err:
            return {"load_error": str(err).replace(path, "env.py")}

        def on_result(r: Any) -> None:
            emit({"phase": "checker", "name": r.name, "passed": r.passed, "level": r.level, "seed": r.seed})
            if "raised MemoryError" in r.reason:
                # the checker would go on hitting the limit check after check until the wall clock runs out
                raise _OutOfMemory(r)

        try:
            report = check_env(cls, levels=levels, seeds=seeds, max_steps=max_steps, on_result=on_result)
        except _OutOfMemory as oom:
            r = oom.result
            return {"memory_error": f"{r.name} {r.reason}", "level": r.level, "seed": r.seed}
        out: dict[str, Any] = {"checker": report.to_dict(), "env_name": report.meta.get("env_name")}
        if report.passed:
            out["degeneracy"], out["degeneracy_failures"] = _degeneracy(
                cls, degeneracy_levels, degeneracy_seeds, degeneracy_max_rate, max_steps, emit
            )
    return out
