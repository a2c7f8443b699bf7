"""Run every cross-framework benchmark in its framework's own venv, then write SUMMARY.md and the plots.

    uv run python benchmarks/run_all.py [--quick] [--gpu] [--rounds N] [--only NAME ...]

Each script in `benchmarks/frameworks/` runs in the venv CI builds for its framework (verl in ``.venv-verl``,
OpenRLHF in ``.venv-openrlhf``, oat in ``.venv-oat``, RL2 in ``.venv-rl2``, the rest in ``.venv``); a missing venv
or script is reported as "not run" with the command that creates it (taken from ``.ci/run``). Their output streams
through, prefixed; a benchmark that fails is reported and the others still run; the exit status is 1 when any
failed. Finally every JSON in ``benchmarks/results/frameworks/`` goes into ``SUMMARY.md`` with one bar chart per
result file (see `benchmarks/frameworks/README.md`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ROOT / "benchmarks" / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))

from common import RESULTS  # noqa: E402
from issue34 import write as write_issue_summary  # noqa: E402
from summary import RunRecord, write_summary  # noqa: E402


@dataclass(frozen=True)
class Bench:
    """One benchmark script and the venv it runs in."""

    script: str
    venv: str


BENCHES = (
    Bench("bench_verl.py", ".venv-verl"),
    Bench("bench_openrlhf.py", ".venv-openrlhf"),
    Bench("bench_oat.py", ".venv-oat"),
    Bench("bench_rl2.py", ".venv-rl2"),
    Bench("bench_env_layer.py", ".venv"),
    Bench("bench_synth_eval.py", ".venv"),
)


def setup_command(venv: str, ci_script: Path = ROOT / ".ci" / "run") -> str:
    """The ``uv sync`` line of `ci_script` that builds `venv` (CI is the one place these commands live)."""
    try:
        lines = ci_script.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        text = re.sub(r"^\s*(time\s+)?", "", line)
        if not text.startswith(("uv sync", "UV_PROJECT_ENVIRONMENT")) or "uv sync" not in text:
            continue
        named = re.search(r"UV_PROJECT_ENVIRONMENT=\S*?(\.venv[\w-]*)", text)
        if (named.group(1) if named else ".venv") == venv:
            return text
    return "uv sync --all-packages" if venv == ".venv" else f"see .ci/run (no `uv sync` line builds {venv})"


def plan(root: Path = ROOT, benches: Sequence[Bench] = BENCHES) -> list[tuple[Bench, str | None]]:
    """Each benchmark with the reason it cannot run here (None: it can)."""
    out: list[tuple[Bench, str | None]] = []
    for bench in benches:
        if not (root / "benchmarks" / "frameworks" / bench.script).exists():
            out.append((bench, f"not run: {bench.script} is not in benchmarks/frameworks/ yet"))
        elif not (root / bench.venv / "bin" / "python").exists():
            command = setup_command(bench.venv, root / ".ci" / "run")
            out.append((bench, f"not run: {bench.venv} missing, create it with `{command}`"))
        else:
            out.append((bench, None))
    return out


def run_one(bench: Bench, flags: list[str], out_dir: Path, timeout: float | None) -> tuple[str, float]:
    """Run one script in its venv, streaming its output prefixed with its name; returns (status, seconds)."""
    python = ROOT / bench.venv / "bin" / "python"
    cmd = [str(python), str(FRAMEWORKS / bench.script), *flags, "--out", str(out_dir)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "VIRTUAL_ENV": str(ROOT / bench.venv)}
    env.pop("PYTHONPATH", None)  # the root venv's paths must not leak into a framework's venv
    tag = bench.script.removesuffix(".py")
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        killer = threading.Timer(timeout, kill) if timeout is not None else None
        if killer is not None:
            killer.start()
        try:
            for line in proc.stdout:
                print(f"  [{tag}] {line.rstrip()}", flush=True)
            code = proc.wait()
        except KeyboardInterrupt:
            proc.kill()
            raise
        finally:
            if killer is not None:
                killer.cancel()
    seconds = time.perf_counter() - t0
    if killed.is_set():
        return f"failed (killed after the {timeout:.0f} s limit)", seconds
    return ("ok" if code == 0 else f"failed (exit {code})"), seconds


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks that can run here, then write the summary; 1 if any benchmark failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every benchmark's smoke mode (small sizes, 3 rounds)")
    parser.add_argument("--gpu", action="store_true", help="passed to every benchmark: measure on the GPU too")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (passed through)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these scripts (e.g. bench_env_layer)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="results folder (default benchmarks/results/frameworks)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds one benchmark may run before it is killed")
    parser.add_argument("--summary-only", action="store_true", help="run nothing; rewrite SUMMARY.md from the JSONs")
    args = parser.parse_args(argv)
    flags = [f for f, on in (("--quick", args.quick), ("--gpu", args.gpu)) if on]
    if args.rounds is not None:
        flags += ["--rounds", str(args.rounds)]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    records: list[RunRecord] = []
    todo = [] if args.summary_only else plan()
    if args.only:
        wanted = {name.removesuffix(".py") for name in args.only}
        todo = [(b, why) for b, why in todo if b.script.removesuffix(".py") in wanted]
    for i, (bench, why) in enumerate(todo, 1):
        head = f"[{i}/{len(todo)}] {bench.script} in {bench.venv}"
        if why is not None:
            print(f"{head}: {why}", flush=True)
            records.append(RunRecord(bench.script, bench.venv, why))
            continue
        print(" ".join([head, *flags, "..."]), flush=True)
        status, seconds = run_one(bench, flags, args.out, args.timeout)
        print(f"{head}: {status} in {seconds:.0f} s", flush=True)
        records.append(RunRecord(bench.script, bench.venv, status, round(seconds, 1)))
    command = " ".join(["benchmarks/run_all.py", *flags])
    summary = write_summary(args.out, records, gpu_requested=args.gpu, since=started, command=command)
    print(f"wrote {summary} (and a bar chart per result file next to it)")
    # the committed benchmarks/SUMMARY.md is written from the default results only (a run into another folder
    # writes its own copy there)
    issue_md = ROOT / "benchmarks" / "SUMMARY.md" if args.out == RESULTS else args.out / "ISSUE34_SUMMARY.md"
    issue_md = write_issue_summary(args.out.parent, issue_md, ROOT / "benchmarks" / "SUMMARY_NOTES.md")
    print(f"wrote {issue_md} (issue 34's targets)")
    failed = [r for r in records if r.status.startswith("failed")]
    for r in records:
        print(f"  {r.script:<22} {r.status}")
    if failed:
        print(f"{len(failed)} benchmark(s) failed: {', '.join(r.script for r in failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
