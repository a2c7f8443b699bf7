"""`evaluate_suite`: correctness, difficulty and diversity of a suite, run concurrently, as one `EvaluationReport`."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gymverse.evaluate import difficulty as D
from gymverse.evaluate.correctness import CHECK_TARGET, CorrectnessConfig, judge_rubric, verdict
from gymverse.evaluate.diversity import Embedder, evaluate_diversity
from gymverse.evaluate.executors import Executor, SandboxExecutor, make_executor
from gymverse.evaluate.jobs import hosted_env_job, hosted_levels_job
from gymverse.evaluate.policies import LLMPolicy, parse_policy_spec, run_episodes
from gymverse.evaluate.schema import (
    Correctness,
    DiversityResult,
    EnvEvaluation,
    EvaluationReport,
    LevelResult,
)
from gymverse.evaluate.suites import EnvEntry, Suite, build_env, job_files, user_paths
from gymverse.trajectory import Trajectory, write_jsonl

LEVELS_TARGET = "gymverse.evaluate.jobs:levels_job"
DEFAULT_POLICIES = ("random", "oracle", "noisy:0.3")
#: Near-duplicate evidence that flags an env (embedding pairs are listed in the report only).
STRUCTURAL_KINDS = ("ast", "statements")
#: ``progress(done, total, what)`` after every finished job.
ProgressFn = Callable[[int, int, str], None]


@dataclass
class EvaluationConfig:
    """Everything `evaluate_suite` needs besides the suite."""

    policies: tuple[str, ...] = DEFAULT_POLICIES
    difficulty: D.DifficultyConfig = field(default_factory=D.DifficultyConfig)
    correctness: CorrectnessConfig = field(default_factory=CorrectnessConfig)
    #: ``sandbox`` (default: untrusted code runs isolated and limited), ``process`` or ``inline``.
    executor: str = "sandbox"
    workers: int | None = None
    run_correctness: bool = True
    run_diversity: bool = True
    embedder: Embedder | None = None
    near_duplicate_threshold: float = 0.95
    #: An LLM client for the ``llm`` policy (and the rubric judge unless `judge` is given).
    llm: Any = None
    llm_policy_options: dict[str, Any] = field(default_factory=dict)
    judge: Any = None
    #: Write every difficulty episode as a `Trajectory` JSONL record to this file (``gymverse view`` reads it).
    trajectories: str | Path | None = None

    def __post_init__(self) -> None:
        self.policies = tuple(dict.fromkeys(parse_policy_spec(p) for p in self.policies))
        if not self.policies:
            raise ValueError("at least one policy is needed")
        if "llm" in self.policies and self.llm is None:
            raise ValueError("the llm policy needs an LLM client (config.llm / --llm URL|local)")


def _llm_levels(
    entry: EnvEntry, client: Any, options: dict[str, Any], cfg: D.DifficultyConfig, record: bool
) -> dict[str, Any]:
    return {"levels": {str(lv): _llm_job(entry, client, options, lv, cfg, record) for lv in cfg.levels}}


def _llm_job(
    entry: EnvEntry, client: Any, options: dict[str, Any], level: int, cfg: D.DifficultyConfig, record: bool
) -> Any:
    try:
        env = build_env(entry.ref, level)
    except Exception as err:
        return {"error": f"cannot build env at level {level}: {type(err).__name__}: {err}"}
    policy = LLMPolicy(client, **options)
    record_as, meta = (entry.name, {"policy": "llm", "level": level}) if record else (None, None)
    episodes = run_episodes(env, policy, cfg.seeds, cfg.max_steps, record_as, meta)
    return {"episodes": [e.to_dict() for e in episodes]}


class _TrajectorySink:
    """Appends the trajectory records that episode jobs return to one JSONL file, as the jobs finish."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self.written = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("", encoding="utf-8")

    def take(self, result: dict[str, Any]) -> None:
        """Move the ``trajectory`` of each episode in `result` to the file (the report keeps only the outcomes)."""
        parts = [result, *result.get("levels", {}).values()]  # one level's result, or a job over all levels
        records = [e.pop("trajectory") for r in parts for e in r.get("episodes", []) if "trajectory" in e]
        if self.path is not None and records:
            self.written += write_jsonl((Trajectory.from_dict(r) for r in records), self.path, append=True)


class _Jobs:
    """Submits jobs: an env's episode jobs start once its correctness job shows the env can be built."""

    def __init__(self, suite: Suite, cfg: EvaluationConfig, executor: Executor, llm_pool: Any) -> None:
        self.cfg, self.executor, self.llm_pool = cfg, executor, llm_pool
        self.entries = {e.name: e for e in suite.entries if not e.load_error}
        self.shipped = {n: job_files(e) if executor.ships_files else (e.ref, {}) for n, e in self.entries.items()}
        self.pending: dict[Future[Any], Any] = {}
        self.episodes_per_env = len(cfg.policies)
        self.total = (self.episodes_per_env + int(cfg.run_correctness)) * len(self.entries)

    def start(self) -> None:
        """Submit the first wave: correctness jobs (or the episode jobs when correctness is off)."""
        for name, (ref, files) in self.shipped.items():
            if self.cfg.run_correctness and isinstance(self.executor, SandboxExecutor):
                # the env is hosted in a sandbox and driven from here: its code cannot touch the checks; one host
                # serves correctness and then the scripted policies' episodes (the llm's are a job of their own)
                ccfg = self.cfg.correctness
                kw = self._hosted_kwargs(name, "", self.cfg.trajectories is not None)
                del kw["policy"]
                plan = {k: v for k, v in ccfg.job_kwargs(ref).items() if k != "ref"}
                kw.update(check=plan, job_timeout=ccfg.job_timeout(), policies=self.scripted)
                fut = self.executor.submit_trusted(hosted_env_job, kw)
                self.pending[fut] = ("env", name)
            elif self.cfg.run_correctness:
                kw = self.cfg.correctness.job_kwargs(ref)
                fut = self.executor.submit(CHECK_TARGET, kw, self.cfg.correctness.job_timeout(), files)
                self.pending[fut] = ("check", name)
            else:
                self.episodes(name)

    @property
    def scripted(self) -> list[str]:
        """The policies a merged env job plays (`hosted_env_job`): all but the llm, whose time is not the env's."""
        return [p for p in self.cfg.policies if p != "llm"]

    def merged(self, name: str, result: dict[str, Any], results: dict[Any, Any]) -> None:
        """File a `hosted_env_job` result under the keys separate jobs use; then submit the llm's episodes."""
        results[("check", name)] = result.get("check", result)  # a crashed job's {"error"} stands for the check
        for policy, res in result.get("episodes", {}).items():
            results[("episodes", name, policy)] = res
        ok = "build_error" not in results[("check", name)] and "error" not in results[("check", name)]
        has_oracle = results[("check", name)].get("facts", {}).get("has_oracle", True)
        llm = 0
        if ok and "llm" in self.cfg.policies:
            llm = 1 - self.episodes(name, has_oracle, only=["llm"])
        self.total -= self.episodes_per_env - len(result.get("episodes", {})) - llm  # not run, or not at all

    def episodes(self, name: str, has_oracle: bool = True, only: Sequence[str] | None = None) -> int:
        """Submit the episode jobs of env `name` (no oracle-based policy without an oracle); returns how many not."""
        entry, (ref, files), dcfg = self.entries[name], self.shipped[name], self.cfg.difficulty
        wanted = self.cfg.policies if only is None else [p for p in self.cfg.policies if p in only]
        policies = [p for p in wanted if has_oracle or not p.startswith(("oracle", "noisy"))]
        record = self.cfg.trajectories is not None
        for policy in policies:
            if isinstance(self.executor, SandboxExecutor):
                fut = self.executor.submit_trusted(hosted_levels_job, self._hosted_kwargs(name, policy, record))
            elif policy == "llm":
                opts = self.cfg.llm_policy_options
                fut = self.llm_pool.submit(_llm_levels, entry, self.cfg.llm, opts, dcfg, record)
            else:
                kw: dict[str, Any] = {"ref": ref, "policy": policy, "levels": list(dcfg.levels)}
                kw.update(seeds=list(dcfg.seeds), max_steps=dcfg.max_steps)
                kw.update(episode_timeout=self.cfg.correctness.episode_timeout, record_as=name if record else None)
                fut = self.executor.submit(LEVELS_TARGET, kw, dcfg.timeout, files)
            self.pending[fut] = ("episodes", name, policy)
        return len(wanted) - len(policies)

    def host_limits(self) -> Any:
        """One limit for every env host of this run (correctness and difficulty), so they share warm spares: a
        host serves the correctness job and then each scripted policy's episodes (each stage keeps its own
        deadline here; this bounds the process)."""
        assert isinstance(self.executor, SandboxExecutor)
        stages = self.cfg.correctness.job_timeout() + len(self.scripted) * self.cfg.difficulty.timeout
        return self.executor.host_limits(max(stages, self.cfg.difficulty.timeout))

    def _hosted_kwargs(self, name: str, policy: str, record: bool) -> dict[str, Any]:
        """`hosted_levels_job` arguments: the env hosted in a sandbox, the policy and its deadlines here."""
        assert isinstance(self.executor, SandboxExecutor)
        (ref, files), dcfg, ccfg = self.shipped[name], self.cfg.difficulty, self.cfg.correctness
        kw: dict[str, Any] = {"ref": ref, "policy": policy, "levels": list(dcfg.levels), "seeds": list(dcfg.seeds)}
        kw.update(timeout=dcfg.timeout, files=files, limits=self.host_limits(), call_timeout=ccfg.call_timeout)
        kw.update(readable_paths=self.executor.readable_paths, max_steps=dcfg.max_steps)
        kw.update(record_as=name if record else None, episode_timeout=ccfg.episode_timeout)
        if policy == "llm":  # the model's time is ours, not the env's: only each env call keeps its deadline
            kw.update(llm=self.cfg.llm, llm_options=self.cfg.llm_policy_options, timeout=None, episode_timeout=None)
        return kw


def _run_jobs(
    suite: Suite, cfg: EvaluationConfig, progress: ProgressFn | None
) -> tuple[dict[Any, Any], str, int, bool]:
    """Run every job; returns {key: result}, the executor's name, its worker count and whether Ctrl-C stopped it
    (then the finished jobs' results are kept, queued jobs are cancelled and running ones are not waited for)."""
    executor = make_executor(cfg.executor, cfg.workers)
    llm_pool = ThreadPoolExecutor(max(1, executor.workers)) if "llm" in cfg.policies else None
    results: dict[Any, Any] = {}
    interrupted = False
    try:
        jobs = _Jobs(suite, cfg, executor, llm_pool)
        sink = _TrajectorySink(cfg.trajectories)
        jobs.start()
        while jobs.pending:
            done, _ = wait(list(jobs.pending), return_when=FIRST_COMPLETED)
            for fut in done:
                key = jobs.pending.pop(fut)
                try:
                    results[key] = fut.result()
                except Exception as err:
                    results[key] = {"error": f"{type(err).__name__}: {err}"}
                if key[0] == "env":
                    jobs.merged(key[1], results.pop(key), results)
                    for policy in jobs.scripted:
                        sink.take(results.get(("episodes", key[1], policy), {}))
                if key[0] == "episodes":
                    sink.take(results[key])
                if key[0] == "check":
                    if "build_error" in results[key] or "error" in results[key]:
                        jobs.total -= jobs.episodes_per_env  # an env that cannot be built gets no episode jobs
                    else:
                        jobs.total -= jobs.episodes(key[1], results[key].get("facts", {}).get("has_oracle", True))
                if progress is not None:
                    progress(len(results), jobs.total, " ".join(str(k) for k in key[1:]))
    except KeyboardInterrupt:
        interrupted = True  # keep what is done: the caller reports it, marked partial
    finally:
        if llm_pool is not None:
            llm_pool.shutdown(wait=not interrupted, cancel_futures=interrupted)
        if interrupted:
            executor.abandon()
        else:
            executor.close()
    return results, executor.name, executor.workers, interrupted


def _difficulty(entry: EnvEntry, cfg: EvaluationConfig, results: dict[Any, Any]) -> dict[str, Any]:
    out = {}
    for policy in cfg.policies:
        levels: list[LevelResult] = []
        errors: list[str] = []
        job = results.get(("episodes", entry.name, policy))
        if job is None:
            if "build_error" not in results.get(("check", entry.name), {"build_error": 1}):
                continue  # not run on purpose: an oracle-based policy on an env without an oracle
            job = {"error": "not run: the env cannot be built"}
        for level in cfg.difficulty.levels:
            res = job["levels"].get(str(level), {"error": "not run"}) if "levels" in job else job
            if "error" in res:
                errors.append(f"level {level}: {res['error']}")
                continue
            levels.append(D.level_result(level, res["episodes"], cfg.difficulty.ks))
        out[policy] = D.policy_difficulty(policy, levels, error="; ".join(errors)[:1000] or None)
    return out


def _env_eval(entry: EnvEntry, cfg: EvaluationConfig, results: dict[Any, Any]) -> EnvEvaluation:
    if entry.load_error:
        corr = Correctness("error", [entry.load_error])  # found here, not in a sandbox: already the user's paths
        return EnvEvaluation(entry.name, entry.kind, entry.ref, entry.domain, entry.description, corr, flags=["error"])
    rubric = None
    judge = cfg.judge if cfg.judge is not None else cfg.llm
    if judge is not None and entry.spec:
        rubric = judge_rubric(judge, entry)
    if cfg.run_correctness:
        evidence = results.get(("check", entry.name), {"error": "correctness job did not run"})
        corr = verdict(evidence, rubric, cfg.correctness.degeneracy_max_rate)
    else:
        corr = Correctness("unverified", ["correctness pass skipped"], rubric=rubric)
    corr.reasons = [user_paths(entry, r) for r in corr.reasons]
    diff = _difficulty(entry, cfg, results)
    for pd in diff.values():
        pd.error = user_paths(entry, pd.error) if pd.error else pd.error
    ev = EnvEvaluation(entry.name, entry.kind, entry.ref, entry.domain, entry.description, corr, diff)
    ref = D.reference_policy(diff)
    if ref is not None:
        pd = diff[ref]
        ev.reference_policy, ev.slope, ev.spearman = ref, pd.slope, pd.spearman
        ev.bucket = D.bucket(pd.mean_rate)
        ev.flags += D.difficulty_flags(pd, cfg.difficulty.flat_tolerance)
    elif diff:
        ev.flags.append("no_difficulty")  # no policy produced a curve: not "hard", unmeasured
    ev.flags += [f for f in corr.probes.get("flags", []) if f not in ev.flags]
    if corr.verdict in ("incorrect", "error"):
        ev.flags.append(corr.verdict)
    return ev


def _guarded_eval(entry: EnvEntry, cfg: EvaluationConfig, results: dict[Any, Any]) -> EnvEvaluation:
    """`_env_eval`, or an ``error`` entry for this env alone when its evidence cannot be turned into a report."""
    try:
        return _env_eval(entry, cfg, results)
    except Exception as err:  # malformed evidence (e.g. from a process worker the env controlled)
        why = f"its evidence could not be evaluated: {type(err).__name__}: {err}"[:500]
        corr = Correctness("error", [why])
        return EnvEvaluation(entry.name, entry.kind, entry.ref, entry.domain, entry.description, corr, flags=["error"])


def _diversity_result(future: Future[DiversityResult], suite: Suite) -> DiversityResult:
    """The diversity result, or an empty one naming the failure: diversity never stops the report."""
    try:
        return future.result()
    except Exception as err:
        return DiversityResult(embedder="none", n=len(suite.entries), error=f"{type(err).__name__}: {err}"[:500])


def _summary(envs: Sequence[EnvEvaluation]) -> dict[str, Any]:
    return {
        "n_envs": len(envs),
        "verdicts": dict(Counter(e.correctness.verdict for e in envs)),
        "buckets": dict(Counter(e.bucket or "unknown" for e in envs)),
        "flagged": {e.name: list(e.flags) for e in envs if e.flags},
    }


def run_metadata(suite: Suite, cfg: EvaluationConfig) -> dict[str, Any]:
    """Settings and machine facts recorded in ``run``."""
    from importlib.metadata import version

    from gymverse import __version__ as core_version

    return {
        "suite": suite.name,
        "policies": list(cfg.policies),
        "levels": list(cfg.difficulty.levels),
        "seeds": list(cfg.difficulty.seeds),
        "ks": list(cfg.difficulty.ks),
        "flat_tolerance": cfg.difficulty.flat_tolerance,
        "correctness": {
            "checker_levels": list(cfg.correctness.checker_levels),
            "checker_seeds": list(cfg.correctness.checker_seeds),
            "oracle_seeds": list(cfg.correctness.oracle_seeds),
            "degeneracy_levels": list(cfg.correctness.degeneracy_levels),
            "degeneracy_seeds": list(cfg.correctness.degeneracy_seeds),
            "degeneracy_max_rate": cfg.correctness.degeneracy_max_rate,
            "constant_levels": list(cfg.correctness.constant_levels),
            "constant_seeds": cfg.correctness.constant_seeds,
            "constant_more_seeds": cfg.correctness.constant_more_seeds,
        }
        if cfg.run_correctness
        else None,
        "llm_model": getattr(cfg.llm, "model", None),
        "judge_model": getattr(cfg.judge if cfg.judge is not None else cfg.llm, "model", None),
        "gymverse_version": core_version,
        "gymverse_eval_version": version("gymverse-eval"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }


def evaluate_suite(
    suite: Suite, config: EvaluationConfig | None = None, progress: ProgressFn | None = None
) -> EvaluationReport:
    """Evaluate every env of `suite`; broken envs are reported in their entry, never raised."""
    cfg = config or EvaluationConfig()
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    # diversity needs only the static entries: it runs (embedding model load included) while the jobs do
    side = ThreadPoolExecutor(1)
    div_future = (
        side.submit(evaluate_diversity, suite.entries, cfg.embedder, cfg.near_duplicate_threshold)
        if cfg.run_diversity
        else None
    )
    interrupted = True
    try:
        results, executor_name, workers, interrupted = _run_jobs(suite, cfg, progress)
    finally:
        side.shutdown(wait=not interrupted, cancel_futures=interrupted)
    if interrupted:  # an env whose correctness job did not finish is not judged: said so, not guessed
        for e in suite.entries:
            results.setdefault(("check", e.name), {"error": "not evaluated: the run was interrupted (Ctrl-C)"})
    envs = [_guarded_eval(e, cfg, results) for e in suite.entries]
    diversity = None
    if div_future is not None and (not interrupted or div_future.done()):
        diversity = _diversity_result(div_future, suite)
        for ev in envs:
            if ev.name in diversity.env_errors:
                ev.flags.append("diversity_error")
                ev.correctness.notes.append(f"diversity: {diversity.env_errors[ev.name]}")
        # the later member of each pair only, and only on structural evidence: embeddings of boilerplate-heavy
        # programs are close for unrelated envs
        twins: dict[str, str] = {}
        for d in diversity.near_duplicates:  # most similar first: each env names its closest earlier twin
            if d["kind"] in STRUCTURAL_KINDS:
                twins.setdefault(d["b"], d["a"])
        for ev in envs:
            if ev.name in twins and "near_duplicate" not in ev.flags:
                ev.flags.append("near_duplicate")
                ev.correctness.notes.append(f"near-duplicate of {twins[ev.name]} (listed first in the suite)")
    run = run_metadata(suite, cfg)
    run.update(
        executor=executor_name,
        workers=workers,
        started_at=started.isoformat(timespec="seconds"),
        wall_seconds=round(time.perf_counter() - t0, 3),
        partial=interrupted,
    )
    summary = _summary(envs)
    if interrupted:
        summary["partial"] = True
    return EvaluationReport(run=run, envs=envs, diversity=diversity, summary=summary)


__all__ = ["DEFAULT_POLICIES", "EvaluationConfig", "ProgressFn", "evaluate_suite", "run_metadata"]
