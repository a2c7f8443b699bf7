"""Sandbox throughput and start latency: `Sandbox` (fresh) and `SandboxPool` vs `subprocess.run`, before vs after.

Arms, each running N short jobs in its own worker process (so two versions of the sandbox can be compared in one
run, and no arm inherits another's warm caches):

* ``subprocess.run``       ``[sys.executable, "-c", src]`` per call: no limits, no isolation (the naive baseline)
* ``fresh bwrap``          `Sandbox(backend="bwrap").run`: bubblewrap launcher, fresh interpreter per call
* ``fresh ctypes``         `Sandbox(backend="ctypes").run`: our own namespace launcher (the fallback path)
* ``pool x1``              `SandboxPool(1)`, one job at a time (its median latency is the start latency)
* ``pool xC``              `SandboxPool(C)`, C = CPU cores, jobs submitted concurrently via `map`

Every sandbox arm runs twice per round: on this checkout ("after") and, with ``--baseline-ref REF`` (a git ref,
exported with ``git archive``) or ``--baseline-src DIR`` (a ``src`` dir holding the ``gymverse`` package), on the
code before a change ("before"). Arms run in a rotating order over ``--rounds`` interleaved rounds; the table shows
medians over rounds, and ``x subprocess.run`` is the median of per-round ratios (each against the baseline of the
same round, so load drift on a shared machine cancels). Two workloads: ``tiny`` (``sum(range(1000))``) and
``numpy`` (``import numpy`` + a small array op; pools preload numpy, the point of keeping workers warm).

Writes ``benchmarks/results/sandbox.json`` (every round kept) and ``sandbox.png``; the target checked is the
issue's: ``pool xC`` (after) at least 5x ``subprocess.run`` on ``tiny``.

    uv run python benchmarks/sandbox.py --baseline-ref main
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "frameworks"))
import common  # benchmarks/frameworks/common.py: rounds, medians, machine, progress

WORKLOADS = {
    "tiny": "print(sum(range(1000)))",
    "numpy": "import numpy as np\nprint(int(np.arange(1000).sum()))",
}
EXPECTED = "499500\n"
RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 5.0


def cpu_s() -> float:
    """CPU seconds of this process and of every child it has reaped (with what they reaped, and so on)."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def zygotes_cpu_s(pool: Any) -> float:
    """CPU seconds of a pool's zygotes and the jobs they reaped so far (benchmark-only peek at its workers: the
    zygote proper is the child of the process the pool started, and lives until the pool closes)."""
    total = 0.0
    for zygote in pool._all:
        pid = zygote.proc.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as fh:
                child = fh.read().split()[0]
            with open(f"/proc/{child}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime, stime, cutime, cstime
    return total


def worker(variant: str, workload: str, n: int) -> dict[str, float]:
    """Run `n` jobs of `workload` on `variant` in this process; exec/s, median latency, setup time, CPU ms per
    job (every process involved: this one, and the launchers, zygotes and jobs; NaN under bwrap)."""
    from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool

    limits = SandboxLimits(timeout=30, memory_mb=2048, max_processes=64)
    src = WORKLOADS[workload]
    latencies: list[float] = []
    t_setup = time.perf_counter()
    if variant == "subprocess.run":

        def one() -> None:
            out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, check=True)
            assert out.stdout == EXPECTED, out

        setup = 0.0
        c0 = cpu_s()
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            one()
            latencies.append(time.perf_counter() - t)
        cpu = cpu_s() - c0
    elif variant.startswith("fresh"):
        sandbox = Sandbox(limits, backend=variant.split()[1])  # type: ignore[arg-type]
        setup = 0.0
        c0 = cpu_s()
        t0 = time.perf_counter()
        for _ in range(n):
            res = sandbox.run(src)
            assert res.stdout == EXPECTED, res
            latencies.append(res.wall_time)
        # bwrap does not wait for the processes inside its sandbox, so their CPU time never reaches us
        cpu = cpu_s() - c0 if variant == "fresh ctypes" else float("nan")
    else:
        size = int(variant.split("x")[1])
        pool = SandboxPool(size, limits, preload=["numpy"] if workload == "numpy" else [])
        try:
            first = pool.run(src)  # time to the first result: zygote boot + one job
            setup = time.perf_counter() - t_setup
            assert first.stdout == EXPECTED, first
            pool.map([src] * size)  # warm every worker
            c0 = cpu_s() + zygotes_cpu_s(pool)
            t0 = time.perf_counter()
            if size == 1:
                for _ in range(n):
                    t = time.perf_counter()
                    res = pool.run(src)
                    assert res.stdout == EXPECTED, res
                    latencies.append(time.perf_counter() - t)
            else:
                results = pool.map([src] * n)
                assert all(r.stdout == EXPECTED for r in results), results[0]
                latencies = [r.wall_time for r in results]
            cpu = cpu_s() + zygotes_cpu_s(pool) - c0
        finally:
            pool.close()
    total = time.perf_counter() - t0
    return {
        "exec_per_s": n / total,
        "median_latency_ms": statistics.median(latencies) * 1000,
        "setup_ms": setup * 1000,
        "cpu_ms_per_job": cpu / n * 1000,
    }


def spawn(variant: str, workload: str, n: int, src_dir: Path | None) -> dict[str, float]:
    """Run one arm in a fresh worker process (on the code in `src_dir`, or this checkout's)."""
    env = dict(os.environ)
    if src_dir is not None:  # shadows the installed (editable) gymverse with the other version
        env["PYTHONPATH"] = os.pathsep.join([str(src_dir), *filter(None, [env.get("PYTHONPATH")])])
    spec = json.dumps({"variant": variant, "workload": workload, "n": n})
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", spec], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} ({workload}) failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def export(ref: str, into: Path) -> Path:
    """`git archive` the core package's sources at `ref` into `into`; returns the ``src`` dir."""
    root = Path(__file__).resolve().parents[1]
    data = subprocess.run(
        ["git", "archive", ref, "packages/gymverse-core/src"], cwd=root, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "packages" / "gymverse-core" / "src"


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="jobs per pool arm and round")
    ap.add_argument("--n-fresh", type=int, default=20, help="jobs per fresh-process arm and round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (medians over these)")
    ap.add_argument("--baseline-ref", help="git ref of the code to compare with (e.g. main)")
    ap.add_argument("--baseline-src", type=Path, help="or a src dir holding that code's gymverse package")
    ap.add_argument("--workloads", default="tiny,numpy", help="comma-separated subset of: " + ",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="3 rounds of small N: a smoke run")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(worker(spec["variant"], spec["workload"], spec["n"])))
        return
    if args.quick:
        args.rounds, args.n, args.n_fresh = 3, 40, 6
    from gymverse.sandbox import isolation_support

    support = isolation_support()
    cores = os.cpu_count() or 1
    variants = (["fresh bwrap"] if support["bwrap"] else []) + ["fresh ctypes", "pool x1", f"pool x{cores}"]
    with tempfile.TemporaryDirectory(prefix="gv-bench-base-") as tmp:
        codes: dict[str, Path | None] = {"after": None}
        if args.baseline_ref:
            codes = {"before": export(args.baseline_ref, Path(tmp)), **codes}
        elif args.baseline_src:
            codes = {"before": args.baseline_src.resolve(), **codes}
        rows = []
        for workload in args.workloads.split(","):
            arms: dict[str, Any] = {"subprocess.run": lambda w=workload: spawn("subprocess.run", w, args.n_fresh, None)}
            for variant in variants:
                n = args.n_fresh if variant.startswith("fresh") else args.n
                for code, src in codes.items():
                    arms[f"{variant}|{code}"] = lambda v=variant, w=workload, n=n, s=src: spawn(v, w, n, s)
            stats = common.interleaved(arms, args.rounds, label=workload)
            rows += summarize(workload, stats, list(codes))
    report(rows, args, support, list(codes))


def summarize(workload: str, stats: dict[str, dict[str, Any]], codes: list[str]) -> list[dict[str, Any]]:
    """One row per (arm, code) with medians and the median per-round ratio to `subprocess.run`."""
    base = stats["subprocess.run"]["exec_per_s_rounds"]
    rows = []
    for arm, s in stats.items():
        variant, _, code = arm.partition("|")
        ratios = [x / b for x, b in zip(s["exec_per_s_rounds"], base, strict=True)]
        row = {"workload": workload, "variant": variant, "code": code or "-", **s}
        row["x_subprocess"] = statistics.median(ratios)
        row["x_subprocess_rounds"] = [round(r, 3) for r in ratios]
        if code == "after" and "before" in codes:
            before = stats[f"{variant}|before"]["exec_per_s_rounds"]
            row["x_before"] = statistics.median(a / b for a, b in zip(s["exec_per_s_rounds"], before, strict=True))
        rows.append(row)
    return rows


def report(rows: list[dict[str, Any]], args: argparse.Namespace, support: dict[str, bool], codes: list[str]) -> None:
    """Table, JSON and plot."""
    cores = os.cpu_count() or 1
    table = [
        {
            "workload": r["workload"],
            "variant": r["variant"],
            "code": r["code"],
            "exec/s": r["exec_per_s"],
            "median latency ms": r["median_latency_ms"],
            "x subprocess.run": r["x_subprocess"],
            "x before": r.get("x_before", ""),
            "cpu ms/job": r["cpu_ms_per_job"],
            "pool start ms": r["setup_ms"] if r["variant"].startswith("pool") else "",
        }
        for r in rows
    ]
    load = os.getloadavg()[0]
    title = f"Sandbox exec/s, medians of {args.rounds} rounds ({cores} cores, load {load:.1f})"
    common.print_table(title, table, list(table[0]))
    tiny = [r for r in rows if r["workload"] == "tiny" and r["code"] == "after"]
    pool = next((r for r in tiny if r["variant"] == f"pool x{cores}"), None)
    value = pool["x_subprocess"] if pool else float("nan")
    met = value >= TARGET
    verdict = "met" if met else "NOT met"
    print(f"\ntarget: pool x{cores}, tiny jobs, >= {TARGET:g}x subprocess.run: {value:.2f}x ({verdict})")
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "machine": common.machine(),
        "isolation": support,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "rows": rows,
        "target": {
            "name": f"pool x{cores} tiny vs subprocess.run",
            "value": value,
            "limit": TARGET,
            "met": met,
        },
    }
    out = RESULTS / "sandbox.json"
    out.write_text(json.dumps(payload, indent=1))
    print(f"wrote {out}")
    plot(rows, codes, RESULTS / "sandbox.png")


def plot(rows: list[dict[str, Any]], codes: list[str], path: Path) -> None:
    """Grouped bars: exec/s per arm and code, one panel per workload, subprocess.run as a line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4), squeeze=False)
    for ax, workload in zip(axes[0], workloads, strict=True):
        mine = [r for r in rows if r["workload"] == workload]
        base = next(r["exec_per_s"] for r in mine if r["variant"] == "subprocess.run")
        variants = list(dict.fromkeys(r["variant"] for r in mine if r["variant"] != "subprocess.run"))
        width = 0.8 / len(codes)
        for i, code in enumerate(codes):
            values = [next(r["exec_per_s"] for r in mine if r["variant"] == v and r["code"] == code) for v in variants]
            ax.bar([x + i * width for x in range(len(variants))], values, width, label=code)
        ax.axhline(base, color="k", linestyle="--", label="subprocess.run")
        ax.axhline(base * TARGET, color="r", linestyle=":", label=f"{TARGET:g}x subprocess.run")
        ax.set_xticks([x + width * (len(codes) - 1) / 2 for x in range(len(variants))], variants)
        ax.set_title(f"{workload} jobs")
        ax.set_ylabel("executions / s (median)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
