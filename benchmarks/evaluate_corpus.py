"""``gymverse evaluate`` on a generated GEM-style corpus: wall time per stage, and whether planted defects are found.

The corpus is generated from the templates in ``packages/gymverse-eval/tests/gem_corpus`` (LLM-style GEM env
files: clean controls and one planted defect per file) into a temporary directory: each variant renames the env
classes, shifts its numeric constants (turn budgets, ranges) and rewrites its strings, so the corpus has the mix of
a real one (about 60% controls, 40% defects, a non-env helper, files needing Python 3.12 or a missing package).
Stages (default settings: sandbox executor, MiniLM embeddings when installed):

* ``load``        `load_suite` (static: no env code runs in the caller)
* ``jobs``        correctness + probes + difficulty jobs (sandbox: one hosted env per file serves them all)
* ``verdicts``    turning evidence into verdicts, flags, curves
* ``diversity``   embeddings, Vendi, near-duplicates, map (static: runs beside the jobs, as in evaluate_suite)
* ``report``      ``evaluation.json`` + ``report.html``

plus the jobs' own seconds per stage (summed over envs: host start + build, reset probes, constant answers, the
checker, oracle, degeneracy policies, difficulty episodes per policy). ``--executors sandbox,inprocess`` runs the
same suite with the hosted checker and with the checker in the env's own (sandboxed) process, and prints their
ratio (issue 34: <= 1.1x); ``sandbox-fresh`` is the hosted checker with a freshly launched host per env instead
of one forked from a warm zygote; ``--rounds N`` runs the executors in turn N times and reports each one's median
(every round must state the same findings: ``rounds_agree``); ``--suite builtin`` evaluates the built-in envs
instead of a generated corpus. Prints a table per run (seconds per stage, the 180 s target, CPU seconds and the
machine's load average, since a shared machine stretches wall time) and the report size; writes
``benchmarks/results/evaluate_corpus.json`` (``--json``: per run also each env's verdict, flags and findings, to
compare runs and code versions). ``--n 200`` by default; ``--warm-embedder`` loads the embedding model first
(fair ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "packages/gymverse-eval/tests/gem_corpus"
CONTROLS = ("clue_court", "number_hunt", "parity_check")
DEFECTS = ("inventory_pick", "lottery_draw", "balance_scale", "digit_sum_quiz", "token_sorter", "unit_convert",
           "word_chain")  # fmt: skip
BROKEN = ("py312_fstring", "needs_package")
WORDS = ("Amber", "Basalt", "Cobalt", "Dune", "Ember", "Fjord", "Granite", "Harbor", "Indigo", "Juniper", "Kestrel")


def variant(source: str, i: int) -> str:
    """A distinct but equivalent file: classes renamed, small integer constants shifted, strings reworded."""
    tag = f"{WORDS[i % len(WORDS)]}{i}"
    out = re.sub(r"class (\w+?)Env\b", rf"class \g<1>{tag}Env", source)
    out = re.sub(r"(class \w+?)(Env)?WithFeedback\((\w+?)Env\)", rf"\1\2WithFeedback(\3{tag}Env)", out)
    out = re.sub(r"max_turns: int = (\d+)", lambda m: f"max_turns: int = {int(m.group(1)) + i % 3}", out)
    return f'"""Variant {i} of this environment ({tag})."""\n' + out.replace("Answer ", f"[{tag}] Answer ", 1)


def generate(directory: Path, n: int) -> dict[str, str]:
    """Write `n` env files (plus one helper); returns {entry name: template}."""
    plan = [*CONTROLS * 2, *DEFECTS]  # ~46% controls; every defect kind equally often
    made: dict[str, str] = {}
    shutil.copy(TEMPLATES / "helpers.py", directory / "helpers.py")
    for i in range(n):
        name = BROKEN[i % 2] if i % 50 == 49 else plan[i % len(plan)]
        text = variant((TEMPLATES / f"{name}.py").read_text(), i)
        stem = f"{name}_{i:03d}"
        (directory / f"{stem}.py").write_text(text)
        made[f"gem:{stem}"] = name
    return made


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    """``(fn(*args), seconds)``."""
    t = time.perf_counter()
    return fn(*args), time.perf_counter() - t


def job_profile(results: dict[Any, Any]) -> dict[str, float]:
    """Seconds the jobs spent per stage, summed over envs (job time, not wall: jobs run side by side): the
    correctness job's own stages (host start + build, reset/complexity probes, constant answers, checker, oracle,
    degeneracy policies) and the difficulty episodes per policy."""
    out: dict[str, float] = {}
    for key, res in results.items():
        if key[0] == "check":
            for stage, sec in (res.get("seconds") or {}).items():
                out[f"correctness: {stage}"] = out.get(f"correctness: {stage}", 0.0) + float(sec)
        elif isinstance(res.get("seconds"), int | float):
            out[f"difficulty: {key[2]}"] = out.get(f"difficulty: {key[2]}", 0.0) + float(res["seconds"])
    return dict(sorted(out.items()))


class InSandbox:
    """The in-process checker: correctness and episodes run next to the env in a sandboxed pool process (the design
    before the hosted checker; the env could rewrite the checks there). Compared with ``sandbox`` (hosted: the
    checks here, the env in a sandboxed host) it prices the isolation of the checks alone: both sandbox the env."""

    name = "sandbox, checker in the env's process"
    ships_files = True

    def __init__(self, workers: int | None = None) -> None:
        from gymverse.evaluate.executors import SandboxExecutor

        self._inner = SandboxExecutor(workers or os.cpu_count() or 1)
        self.workers = self._inner.workers

    def submit(self, target: str, kwargs: Any, timeout: float, files: Any = None) -> Any:
        """As `SandboxExecutor.submit`: a fresh limited process per job, forked from a warm pool worker."""
        return self._inner.submit(target, kwargs, timeout, files)

    def close(self) -> None:
        """Stop the pool."""
        self._inner.close()

    def abandon(self) -> None:
        """Ctrl-C."""
        self._inner.abandon()


def run_once(spec: str, executor: str, out_dir: str, planted: dict[str, str]) -> dict[str, Any]:
    """Evaluate the suite `spec` stage by stage with `executor`; the timings, load and findings as JSON."""
    from gymverse.evaluate import EvaluationConfig, evaluate_diversity, load_suite
    from gymverse.evaluate.diversity import default_embedder
    from gymverse.evaluate.report import write_report
    from gymverse.evaluate.runner import _env_eval, _run_jobs, _summary, run_metadata
    from gymverse.evaluate.schema import EvaluationReport

    stages: dict[str, float] = {}
    usage0 = _cpu()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    suite = load_suite(spec)
    stages["load"] = time.perf_counter() - t0
    from gymverse.evaluate import correctness, runner

    kind = "sandbox" if executor in ("inprocess", "sandbox-fresh") else executor
    cfg = EvaluationConfig(embedder=default_embedder(), executor=kind)
    make = runner.make_executor
    correctness.FORKED_HOSTS = executor != "sandbox-fresh"  # hosted: forked hosts; -fresh: a launcher per host
    if executor == "inprocess":
        runner.make_executor = lambda kind, workers=None, readable_paths=(): InSandbox(workers)  # type: ignore[assignment]
    done = [0]

    def progress(n_done: int, total: int, what: str) -> None:
        if n_done - done[0] >= max(1, total // 10) or n_done == total:
            done[0] = n_done
            print(f"  {executor} jobs {n_done}/{total} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)

    t = time.perf_counter()
    # as evaluate_suite does: diversity (static) in a side thread while the jobs run
    side = ThreadPoolExecutor(1)
    div_future = side.submit(timed, evaluate_diversity, suite.entries, cfg.embedder, cfg.near_duplicate_threshold)
    try:
        results, executor_name, workers, _ = _run_jobs(suite, cfg, progress)
    finally:
        runner.make_executor = make
        correctness.FORKED_HOSTS = True
    stages["jobs"] = time.perf_counter() - t
    diversity, stages["diversity (overlapped)"] = div_future.result()
    side.shutdown()
    stages["waiting for diversity"] = time.perf_counter() - t - stages["jobs"]
    job_stages = job_profile(results)
    t = time.perf_counter()
    envs = [_env_eval(e, cfg, results) for e in suite.entries]
    stages["verdicts"] = time.perf_counter() - t
    run = run_metadata(suite, cfg)
    run.update(executor=executor_name, workers=workers, wall_seconds=round(time.perf_counter() - t0, 3))
    report = EvaluationReport(run=run, envs=envs, diversity=diversity, summary=_summary(envs))
    t = time.perf_counter()
    _, html_path = write_report(report, out_dir)
    stages["report"] = time.perf_counter() - t
    total = time.perf_counter() - t0
    found = sum(1 for e in envs if planted.get(e.name) in DEFECTS + BROKEN and e.correctness.verdict != "unverified")
    return {
        "executor": executor_name + (" (a fresh launcher per host)" if executor == "sandbox-fresh" else ""),
        "workers": workers,
        "n_envs": len(suite.entries),
        "stages_s": stages,
        "job_stages_s": job_stages,
        "total_s": total,
        "cpu_s": _cpu() - usage0,
        "load_average": [load0, os.getloadavg()[0]],
        "report_kib": html_path.stat().st_size / 1024 if html_path.exists() else 0.0,
        "verdicts": {e.name: e.correctness.verdict for e in envs},
        "flags": {e.name: e.flags for e in envs},  # which check found each planted defect, not only that one did
        # every finding as the report states it: two runs (executors, code versions) must agree on these exactly
        "findings": {e.name: _findings(e) for e in envs},
        "defects_found": found,
        "defects_planted": sum(1 for v in planted.values() if v in DEFECTS + BROKEN),
        "controls_flagged": [
            e.name for e in envs if planted.get(e.name) in CONTROLS and e.correctness.verdict != "unverified"
        ],
        "embedder": getattr(cfg.embedder, "name", "?"),
    }


def _findings(env: Any) -> list[str]:
    """An env's findings as the report states them (severity, code, message), sorted."""
    return sorted(f"{f['severity']}:{f['code']}: {f['message']}" for f in env.correctness.findings)


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children so far."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))  # fmt: skip


def show(console: Console, spec: str, res: dict[str, Any]) -> None:
    """One run's table."""
    table = Table(title=f"gymverse evaluate on {res['n_envs']} envs of {spec} ({res['executor']}, {res['workers']} w)")
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    for name, sec in res["stages_s"].items():
        table.add_row(name, f"{sec:.1f}", style="dim" if "overlapped" in name else None)
    table.add_row("total", f"{res['total_s']:.1f}", style="bold")
    for name, sec in res["job_stages_s"].items():
        table.add_row(f"  job-seconds, {name}", f"{sec:.1f}", style="dim")
    table.add_row("CPU seconds (this process + waited-for children)", f"{res['cpu_s']:.1f}")
    table.add_row("machine load average (1 min, start -> end)", "{:.1f} -> {:.1f}".format(*res["load_average"]))
    table.add_row("target (issue 31, 200 files)", "180.0")
    console.print(table)
    console.print(f"report.html: {res['report_kib']:.0f} KiB in {res['stages_s']['report']:.2f}s")
    if res["defects_planted"]:
        flagged = res["controls_flagged"]
        console.print(f"defects found: {res['defects_found']}/{res['defects_planted']}; controls flagged: "
                      f"{len(flagged)} {flagged[:5]}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Generate, evaluate stage by stage with each executor, print and save the timings and the hosted ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="env files to generate (default 200)")
    parser.add_argument("--suite", help="evaluate this suite (e.g. builtin) instead of a generated corpus")
    how = (
        "sandbox (hosted checker), sandbox-fresh (hosted, a fresh launcher per host instead of a fork of a warm "
        "zygote), inprocess (the checker next to the env, sandboxed), process, inline"
    )
    parser.add_argument("--executors", default="sandbox", help=f"comma-separated, run in turn: {how}")
    parser.add_argument("--warm-embedder", action="store_true", help="load the embedding model before the runs "
                        "(for ratios between runs; the CLI pays it once)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="run the executors in turn this many times; each "
                        "executor's median run (by total) is reported (default 1)")  # fmt: skip
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/evaluate_corpus"), help="report directory")
    parser.add_argument("--json", default=str(ROOT / "benchmarks/results/evaluate_corpus.json"), help="result file")
    parser.add_argument("--write-only", metavar="DIR", help="only generate the corpus into DIR (to time the CLI on it)")
    args = parser.parse_args(argv)
    if args.write_only:
        Path(args.write_only).mkdir(parents=True, exist_ok=True)
        print(f"wrote {len(generate(Path(args.write_only), args.n))} env files to {args.write_only}")
        return 0
    console = Console(width=120)
    runs: dict[str, dict[str, Any]] = {}
    warm = None
    if args.warm_embedder:  # the first run would pay the model's import and load alone, the others not
        from gymverse.evaluate.diversity import default_embedder

        t = time.perf_counter()
        default_embedder().embed(["warm up"])
        warm = time.perf_counter() - t
        console.print(f"embedder warm-up (paid once per CLI run, left out of each run below): {warm:.1f}s")
    with tempfile.TemporaryDirectory(prefix="gymverse-corpus-") as tmp:
        planted = {} if args.suite else generate(Path(tmp), args.n)
        spec = args.suite or tmp
        executors = [e.strip() for e in args.executors.split(",") if e.strip()]
        rounds: dict[str, list[dict[str, Any]]] = {e: [] for e in executors}
        for _ in range(max(1, args.rounds)):  # interleaved: a load change on the machine hits every executor
            for executor in executors:
                rounds[executor].append(run_once(spec, executor, args.out, planted))
                show(console, args.suite or "a generated corpus", rounds[executor][-1])
        for executor, done in rounds.items():
            runs[executor] = sorted(done, key=lambda r: r["total_s"])[len(done) // 2]
            runs[executor]["rounds_total_s"] = [r["total_s"] for r in done]
            # every round must state the same findings (a timing-dependent finding would show here)
            runs[executor]["rounds_agree"] = all(r["findings"] == done[0]["findings"] for r in done)
    doc: dict[str, Any] = {
        "suite": args.suite or f"generated corpus ({args.n} files)",
        "runs": runs,
        "embedder_warm_up_s": warm,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
    }
    if "sandbox" in runs and "inprocess" in runs:
        hosted, inproc = runs["sandbox"], runs["inprocess"]
        doc["hosted_over_inprocess"] = hosted["total_s"] / inproc["total_s"]
        doc["hosted_over_inprocess_jobs"] = hosted["stages_s"]["jobs"] / inproc["stages_s"]["jobs"]
        same = (hosted["verdicts"], hosted["findings"]) == (inproc["verdicts"], inproc["findings"])
        console.print(f"hosted / in-process: total {doc['hosted_over_inprocess']:.2f}x, jobs "
                      f"{doc['hosted_over_inprocess_jobs']:.2f}x (target <= 1.1x); same verdicts and findings: "
                      f"{same}")  # fmt: skip
    if "sandbox" in runs and "sandbox-fresh" in runs:
        hosted, fresh = runs["sandbox"], runs["sandbox-fresh"]
        doc["forked_over_fresh_hosts"] = hosted["total_s"] / fresh["total_s"]
        same = (hosted["verdicts"], hosted["findings"]) == (fresh["verdicts"], fresh["findings"])
        console.print(f"forked / fresh hosts: total {doc['forked_over_fresh_hosts']:.2f}x; same verdicts and "
                      f"findings: {same}")  # fmt: skip
    if len(runs) > 1:
        console.print("medians of " + ", ".join(f"{e} {r['rounds_total_s']}" for e, r in runs.items()))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
