"""Episode jobs: JSON arguments in, a JSON dict out.

`episodes_job`/`levels_job` run inside process workers, next to the env (their per-episode deadlines are alarms in
that process; the job's own timeout is enforced by the executor). `hosted_levels_job` is the sandbox executor's:
it runs in the trusted process against the env hosted in a sandbox, so every deadline (each episode, the whole job)
is kept here and ends with the host killed; an env that handles or ignores signals cannot stretch its time.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from gymverse.deadline import CallTimeout, deadline
from gymverse.evaluate.correctness import evidence_on, host_record, ref_host
from gymverse.evaluate.policies import LLMPolicy, Policy, make_policy, run_episodes
from gymverse.evaluate.suites import build_env
from gymverse.loader import prepare_ref
from gymverse.sandbox import SandboxLimits
from gymverse.sandbox.hosted import EnvCallError, EnvHost, EnvHostError


def episodes_job(
    ref: str,
    policy: str,
    level: int,
    seeds: Sequence[int],
    max_steps: int | None = None,
    record_as: str | None = None,
    episode_timeout: float | None = None,
) -> dict[str, Any]:
    """Play `policy` on the env `ref` at `level` once per seed; a construction failure is returned as ``error``.

    With `record_as` each episode dict also carries its trajectory record (env id `record_as`).
    """
    with contextlib.redirect_stdout(sys.stderr):  # env prints must not mix with a sandbox's result channel
        try:
            prepare_ref(ref)  # an installed suite's import (seconds) is not the build's deadline
            with deadline(episode_timeout, f"building the env at level {level}"):
                env = build_env(ref, level)
        except BaseException as err:
            if isinstance(err, KeyboardInterrupt):
                raise
            return {"error": f"cannot build env at level {level}: {type(err).__name__}: {err}"[:1000]}
        try:
            meta = {"policy": policy, "level": level}
            episodes = run_episodes(
                env, make_policy(policy), list(seeds), max_steps, record_as, meta, timeout=episode_timeout
            )
        finally:
            with contextlib.suppress(Exception):
                env.close()
    return {"episodes": [e.to_dict() for e in episodes]}


def levels_job(
    ref: str,
    policy: str,
    levels: Sequence[int],
    seeds: Sequence[int],
    max_steps: int | None = None,
    record_as: str | None = None,
    episode_timeout: float | None = None,
) -> dict[str, Any]:
    """`episodes_job` for each level in one job (one sandbox start per env and policy): ``{"levels": {L: result}}``."""
    return {
        "levels": {
            str(lv): episodes_job(ref, policy, lv, seeds, max_steps, record_as, episode_timeout) for lv in levels
        }
    }


def hosted_levels_job(
    ref: str,
    policy: str,
    levels: Sequence[int],
    seeds: Sequence[int],
    *,
    timeout: float | None,
    files: dict[str, str] | None = None,
    limits: SandboxLimits | None = None,
    call_timeout: float = 10.0,
    readable_paths: Sequence[str] = (),
    max_steps: int | None = None,
    record_as: str | None = None,
    episode_timeout: float | None = None,
    llm: Any = None,
    llm_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`levels_job` from the trusted side: the env runs in a sandboxed `EnvHost`, the policy and every deadline
    here. Each episode gets `episode_timeout`, the whole job `timeout` (then its remaining levels are not run), each
    call into the env `call_timeout` (None for the other two: no limit); a host killed at a deadline is replaced for
    the next level (at most twice). ``policy="llm"`` uses `llm`."""
    host = ref_host(ref, files, limits, call_timeout, readable_paths)
    try:
        with contextlib.suppress(EnvHostError, EnvCallError):
            host.start()  # its imports outside the first build's deadline; a failed start fails that build, reported
        return _levels_on(host, policy, levels, seeds, timeout, max_steps, record_as, episode_timeout, llm,
                          llm_options)  # fmt: skip
    finally:
        host.close()


def _levels_on(
    host: EnvHost,
    policy: str,
    levels: Sequence[int],
    seeds: Sequence[int],
    timeout: float | None,
    max_steps: int | None,
    record_as: str | None,
    episode_timeout: float | None,
    llm: Any = None,
    llm_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of `hosted_levels_job` on an open `host`: ``{"levels": {L: result}, "seconds": wall}``."""
    started = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        with deadline(timeout, f"the {policy} episodes job"):
            for lv in levels:
                play = _policy(policy, llm, llm_options)
                out[str(lv)] = _hosted_level(host, play, lv, seeds, max_steps, record_as, episode_timeout)
    except CallTimeout as err:  # the whole job's time is up: the level it was in and the rest are not run
        for lv in levels:
            out.setdefault(str(lv), {"error": f"not run: {err}"[:500]})
    return {"levels": out, "seconds": round(time.perf_counter() - started, 4)}


def hosted_env_job(
    ref: str,
    *,
    check: dict[str, Any],
    job_timeout: float | None,
    policies: Sequence[str],
    levels: Sequence[int],
    seeds: Sequence[int],
    timeout: float | None,
    files: dict[str, str] | None = None,
    limits: SandboxLimits | None = None,
    call_timeout: float = 10.0,
    readable_paths: Sequence[str] = (),
    max_steps: int | None = None,
    record_as: str | None = None,
    episode_timeout: float | None = None,
) -> dict[str, Any]:
    """Correctness (`check`: `CorrectnessConfig.job_kwargs`) and then the scripted `policies`' episodes of one env,
    all against one sandboxed host (one start, one import of the env file), every deadline kept here as in
    `check_hosted` and `hosted_levels_job`. Returns ``{"check": evidence, "episodes": {policy: levels result}}``;
    an env that cannot be built, or whose correctness job failed, gets no episodes; no oracle, no oracle policies.
    """
    # one host for every stage: its restart budget is what the separate jobs had together
    host = ref_host(ref, files, limits, call_timeout, readable_paths, max_restarts=2 * (1 + len(policies)))
    episodes: dict[str, Any] = {}
    try:
        evidence = evidence_on(host, ref, job_timeout, check)
        runs = "error" not in evidence and "build_error" not in evidence
        has_oracle = evidence.get("facts", {}).get("has_oracle", True)
        for policy in policies if runs else ():
            if has_oracle or not policy.startswith(("oracle", "noisy")):
                episodes[policy] = _levels_on(host, policy, levels, seeds, timeout, max_steps, record_as,
                                              episode_timeout)  # fmt: skip
    finally:
        host.close()
    return {"check": host_record(evidence, host), "episodes": episodes}


def _policy(spec: str, llm: Any, options: dict[str, Any] | None) -> Policy:
    return LLMPolicy(llm, **(options or {})) if spec == "llm" else make_policy(spec)


def _hosted_level(
    host: EnvHost,
    policy: Policy,
    level: int,
    seeds: Sequence[int],
    max_steps: int | None,
    record_as: str | None,
    episode_timeout: float | None,
) -> dict[str, Any]:
    try:
        env = host.make(level)
    except Exception as err:
        return {"error": f"cannot build env at level {level}: {type(err).__name__}: {err}"[:1000]}
    try:
        meta = {"policy": policy.name, "level": level}
        episodes = run_episodes(env, policy, list(seeds), max_steps, record_as, meta, timeout=episode_timeout)
    finally:
        env.close()
    return {"episodes": [e.to_dict() for e in episodes]}


__all__ = ["episodes_job", "hosted_env_job", "hosted_levels_job", "levels_job"]
