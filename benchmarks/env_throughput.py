"""Env-stepping throughput (steps/s): a plain loop, every GymVerse vector backend, and GEM's vector envs.

Workloads (the same game everywhere: add ``\\boxed{1}`` increments to hit a hidden total):

* ``cheap``  ~5 µs of Python per step (`vectest:Count`)
* ``io``     1 ms of waiting per step (`vectest:SleepIO`: ``asyncio.sleep`` when awaited natively, else
             ``time.sleep``); ideal = N envs x 1000 steps/s
* ``cpu``    ~1 ms of pure-Python work per step (`vectest:BusyCPU`, iterations calibrated at start)

Runners: ``plain`` (a Python loop over single envs, reset when done), GymVerse ``sync``/``async``/``process``/``ray``
(``make_vec``), ``asyncio-bare`` (``gather`` of N bare ``asyncio.sleep(1 ms)``: the event loop's own ceiling, io
only), ``asyncio-envs`` (``gather`` of the same envs' own ``astep`` coroutines: the async backend's ceiling),
and GEM's ``SyncVectorEnv``/``AsyncVectorEnv`` plus a plain loop, stepping the very same env code through a thin
GEM ``Env`` adapter, so only the vectorization differs. GEM runs in a throwaway venv
(``benchmarks/results/.gem-venv``, created with ``uv venv`` + ``uv pip install gem-llm`` + this checkout's
gymverse-core when missing) as a subprocess that prints JSON. Writes ``benchmarks/results/env_throughput.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")  # before Ray is imported: start workers directly

import gymverse
import gymverse.testing.vectest
from gymverse.testing.vectest import calibrate_iterations
from gymverse.vector import make_vec
from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).resolve().parent / "results"
GEM_VENV = RESULTS / ".gem-venv"
WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {
    "cheap": ("vectest:Count", {}),
    "io": ("vectest:SleepIO", {"delay": 0.001}),
    "cpu": ("vectest:BusyCPU", {}),  # iterations filled in by calibration
}
CORE = Path(__file__).resolve().parent.parent / "packages" / "gymverse-core"
ACTION = r"\boxed{1}"
GV_BACKENDS = ("sync", "async", "process", "ray")


def rate(
    step_batch: Callable[[], int], budget: float, min_batches: int = 3, batch_times: list[float] | None = None
) -> float:
    """Steps/s of repeated `step_batch` calls (two warm-up calls, then at least `budget` seconds).

    With `batch_times`, each call's seconds are appended to it.
    """
    step_batch()
    step_batch()
    steps, batches, t0 = 0, 0, time.perf_counter()
    while True:
        t = time.perf_counter()
        steps += step_batch()
        if batch_times is not None:
            batch_times.append(time.perf_counter() - t)
        batches += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= budget and batches >= min_batches:
            return steps / elapsed


def plain_loop(env_id: str, kwargs: dict[str, Any], n: int, budget: float) -> float:
    """A Python loop over `n` single envs, resetting each when its episode ends."""
    envs = [gymverse.make(env_id, **kwargs) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)

    def batch() -> int:
        for env in envs:
            _, _, terminated, truncated, _ = env.step(ACTION)
            if terminated or truncated:
                env.reset()
        return n

    return rate(batch, budget)


def gymverse_vec(
    env_id: str,
    kwargs: dict[str, Any],
    n: int,
    backend: str,
    budget: float,
    cores: int,
    batch_times: list[float] | None = None,
) -> float:
    """`make_vec` on `backend`; process/ray use one worker per core (`batch_times`: see `rate`)."""
    opts = {"num_workers": min(n, cores)} if backend in ("process", "ray") else {}
    with make_vec(env_id, n, backend=backend, seed=0, backend_options=opts, **kwargs) as venv:
        venv.reset(seed=0)
        actions = [ACTION] * n
        return rate(lambda: len(venv.step(actions)), budget, batch_times=batch_times)


def asyncio_bare(n: int, budget: float) -> float:
    """The event loop's ceiling for the io workload: gather n bare 1 ms sleeps per batch."""

    async def main() -> float:
        steps, batches, t0 = 0, 0, time.perf_counter()
        while True:
            await asyncio.gather(*(asyncio.sleep(0.001) for _ in range(n)))
            steps += n
            batches += 1
            if time.perf_counter() - t0 >= budget and batches >= 3:
                return steps / (time.perf_counter() - t0)

    return asyncio.run(main())


def asyncio_envs(env_id: str, kwargs: dict[str, Any], n: int, budget: float) -> float:
    """`gather` of the same envs' own ``astep`` coroutines, no vector env: the ceiling for the async backend."""
    envs = [gymverse.make(env_id, **kwargs) for _ in range(n)]

    async def one(env: Any) -> None:
        result = await env.astep(ACTION)
        if result[2] or result[3]:
            await env.areset()

    async def main() -> float:
        for i, env in enumerate(envs):
            await env.areset(seed=i)
        steps, batches, t0 = 0, 0, time.perf_counter()
        while True:
            await asyncio.gather(*(one(env) for env in envs))
            steps += n
            batches += 1
            if time.perf_counter() - t0 >= budget and batches >= 3:
                return steps / (time.perf_counter() - t0)

    return asyncio.run(main())


def start_times(cores: int) -> dict[str, float]:
    """Seconds to start a process-backend vec env (8 envs, one worker per core) per start method."""
    out = {}
    for method in ("fork", "forkserver", "spawn"):
        t0 = time.perf_counter()
        with make_vec(
            "vectest:Count", 8, backend="process", backend_options={"num_workers": cores, "start_method": method}
        ) as v:
            v.reset(seed=0)
        out[method] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------------------------------- GEM
GEM_SCRIPT = r'''
import json, sys, time
import gymverse
import gymverse.testing.vectest
from gem.core import Env
from gem.vector.sync_vector_env import SyncVectorEnv
from gem.vector.async_vector_env import AsyncVectorEnv


class Adapter(Env):
    """A GymVerse env behind GEM's Env interface: the same env code as the GymVerse runners."""

    def __init__(self, env_id, kwargs):
        super().__init__()
        self.env = gymverse.make(env_id, **kwargs)

    def reset(self, seed=None):
        return self.env.reset(seed=seed)

    def step(self, action):
        return tuple(self.env.step(action))


ACTION = "\\boxed{1}"


def rate(fn, budget, batch_times=None):
    fn(); fn()
    steps, batches, t0 = 0, 0, time.perf_counter()
    while True:
        t = time.perf_counter()
        steps += fn(); batches += 1
        if batch_times is not None:
            batch_times.append(time.perf_counter() - t)
        el = time.perf_counter() - t0
        if el >= budget and batches >= 3:
            return steps / el


def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def plain(env_id, kw, n, budget):
    envs = [Adapter(env_id, kw) for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(i)
    def batch():
        for e in envs:
            _, _, te, tr, _ = e.step(ACTION)
            if te or tr:
                e.reset()
        return n
    return rate(batch, budget)


def vec(cls, env_id, kw, n, budget, p50_ms):
    """steps/s of one vector env; its median step-call time (what each env's step waits) goes to p50_ms."""
    venv = cls([env_id] * n, [lambda: Adapter(env_id, kw)] * n)
    venv.reset(seed=0)
    acts = [ACTION] * n
    times = []
    r = rate(lambda: len(venv.step(acts)[0]), budget, times)
    p50_ms.append(1e3 * median(times))
    if hasattr(venv, "thread_pool_executer"):
        venv.thread_pool_executer.shutdown()
    return r


workloads, ns, budget = json.loads(sys.argv[1]), json.loads(sys.argv[2]), float(sys.argv[3])
out = {}
for w, (env_id, kw) in workloads.items():
    for n in ns:
        sync_ms, async_ms = [], []
        out[f"{w}/{n}"] = {
            "gem-plain": plain(env_id, kw, n, budget),
            "gem-sync": vec(SyncVectorEnv, env_id, kw, n, budget, sync_ms),
            "gem-async": vec(AsyncVectorEnv, env_id, kw, n, budget, async_ms),
            "gem-sync p50_ms": sync_ms[0],
            "gem-async p50_ms": async_ms[0],
        }
print(json.dumps(out))
'''


def gem_python(console: Console) -> Path | None:
    """The throwaway venv's interpreter with gem-llm installed (installing it when missing)."""
    python = GEM_VENV / "bin" / "python"
    probe = [str(python), "-c", "import gem, gymverse"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    console.print(
        f"[yellow]gem-llm not found: installing it (and this checkout's gymverse-core, for the shared test envs) "
        f"into a throwaway venv at {GEM_VENV} with uv venv + uv pip"
    )
    try:
        if not python.exists():
            subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(GEM_VENV)], check=True)
        subprocess.run(["uv", "pip", "install", "-q", "--python", str(python), "gem-llm", "-e", str(CORE)], check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        console.print(f"[red]could not install gem-llm ({err}); GEM columns are skipped")
        return None
    return python


def run_gem(
    console: Console, ns: list[int], budget: float, workloads: dict[str, tuple[str, dict[str, Any]]] | None = None
) -> dict[str, dict[str, float]]:
    """GEM's numbers (steps/s of each runner, and the vector envs' median step-call ms), measured in its own venv.

    Keys are ``<workload>/<N>``; `workloads` defaults to this benchmark's `WORKLOADS`.
    """
    python = gem_python(console)
    if python is None:
        return {}
    cmd = [str(python), "-c", GEM_SCRIPT, json.dumps(workloads or WORKLOADS), json.dumps(ns), str(budget)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        console.print(f"[red]GEM benchmark failed:\n{proc.stderr[-2000:]}")
        return {}
    result: dict[str, dict[str, float]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def paired_targets(cores: int, budget: float, rounds: int) -> dict[str, float]:
    """The target ratios measured as medians of interleaved A/B runs (robust to drifting machine load)."""
    cheap, io, cpu = WORKLOADS["cheap"], WORKLOADS["io"], WORKLOADS["cpu"]
    pairs: dict[str, tuple[Callable[[], float], Callable[[], float]]] = {
        "sync / plain, cheap, N=64": (
            lambda: gymverse_vec(cheap[0], cheap[1], 64, "sync", budget, cores),
            lambda: plain_loop(cheap[0], cheap[1], 64, budget),
        ),
        "async / ideal, io, N=256": (
            lambda: gymverse_vec(io[0], io[1], 256, "async", budget, cores),
            lambda: 256_000.0,
        ),
        "async / asyncio-envs, io, N=256": (
            lambda: gymverse_vec(io[0], io[1], 256, "async", budget, cores),
            lambda: asyncio_envs(io[0], io[1], 256, budget),
        ),
        "process / sync, cpu, N=64": (
            lambda: gymverse_vec(cpu[0], cpu[1], 64, "process", budget, cores),
            lambda: gymverse_vec(cpu[0], cpu[1], 64, "sync", budget, cores),
        ),
    }
    out = {}
    for name, (a, b) in pairs.items():
        ratios = []
        for _ in range(rounds):
            ratios.append(a() / b())
        out[name] = statistics.median(ratios)
    return out


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_accounting(budget: float, cores: int) -> dict[str, float]:
    """cpu workload, N=64: steps/s, CPU cores actually obtained and steps per CPU-second, process vs sync.

    On a machine shared with other jobs the workers may get far less than a core each; steps per CPU-second
    separates the backend's own efficiency from the CPU the scheduler happened to grant (Linux /proc only).
    """
    env_id, kwargs = WORKLOADS["cpu"]
    actions = [ACTION] * 64
    out: dict[str, float] = {}
    for backend in ("sync", "process"):
        opts = {"num_workers": cores} if backend == "process" else {}
        with make_vec(env_id, 64, backend=backend, seed=0, backend_options=opts, **kwargs) as venv:
            venv.reset(seed=0)
            pids = [w.proc.pid for w in getattr(venv, "workers", [])]
            before = [_cpu_seconds(p) for p in pids]
            cpu0, steps, t0 = time.process_time(), 0, time.perf_counter()
            while time.perf_counter() - t0 < budget:
                steps += len(venv.step(actions))
            wall = time.perf_counter() - t0
            used = time.process_time() - cpu0 + sum(_cpu_seconds(p) - b for p, b in zip(pids, before))
        out[f"{backend} steps/s"] = steps / wall
        out[f"{backend} cores used"] = used / wall
        out[f"{backend} steps per CPU-s"] = steps / used
    return out


def main() -> None:
    """Run every workload x N x runner and print/write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 1, 8, 64 and shorter timings")
    ap.add_argument("--no-gem", action="store_true", help="skip GEM")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    ap.add_argument("--paired-rounds", type=int, default=5, help="interleaved A/B rounds for the target ratios")
    args = ap.parse_args()
    # A fixed width when logging to a file or pipe: rich would otherwise assume 80 columns and cut the headers.
    console = Console(width=None if sys.stdout.isatty() else 160)
    ns = [1, 8, 64] if args.quick else [1, 8, 64, 256]
    budget = 0.3 if args.quick else 1.0
    cores = os.cpu_count() or 1
    backends = [b for b in GV_BACKENDS if not (b == "ray" and args.no_ray)]
    results: dict[str, dict[str, float]] = {}
    WORKLOADS["cpu"][1]["iterations"] = calibrate_iterations(0.001)
    load_before = os.getloadavg()
    for workload, (env_id, kwargs) in WORKLOADS.items():
        for n in ns:
            key = f"{workload}/{n}"
            row = {"plain": plain_loop(env_id, kwargs, n, budget)}
            for backend in backends:
                if backend != "ray":
                    row[backend] = gymverse_vec(env_id, kwargs, n, backend, budget, cores)
            if workload == "io":
                row["asyncio-bare"] = asyncio_bare(n, budget)
                row["asyncio-envs"] = asyncio_envs(env_id, kwargs, n, budget)
                row["ideal"] = n * 1000.0
            results[key] = row
            console.print(f"{key}: " + ", ".join(f"{k}={v:,.0f}" for k, v in row.items()))
    starts = start_times(cores)
    paired = paired_targets(cores, budget / 2, args.paired_rounds) if args.paired_rounds > 0 else {}
    accounting = cpu_accounting(3 * budget, cores) if Path("/proc/self/stat").exists() else {}
    if not args.no_gem:
        for key, row in run_gem(console, ns, budget).items():
            results[key].update(row)
    if "ray" in backends:
        # Last: a Ray driver runs background threads that slow pure-Python code in this process (~2x measured).
        import ray

        ray.init(include_dashboard=False, log_to_driver=False)
        for workload, (env_id, kwargs) in WORKLOADS.items():
            for n in ns:
                results[f"{workload}/{n}"]["ray"] = gymverse_vec(env_id, kwargs, n, "ray", budget, cores)
                console.print(f"{workload}/{n}: ray={results[f'{workload}/{n}']['ray']:,.0f}")
        ray.shutdown()

    columns = ["plain", *backends, "asyncio-bare", "asyncio-envs", "gem-plain", "gem-sync", "gem-async", "ideal"]
    table = Table(
        title=f"Env steps/s ({cores} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f})"
    )
    table.add_column("workload/N")
    for c in columns:
        table.add_column(c, justify="right")
    for key, row in results.items():
        table.add_row(key, *(f"{row[c]:,.0f}" if c in row else "-" for c in columns))
    console.print(table)

    def ratio(key: str, a: str, b: str) -> float | None:
        row = results.get(key, {})
        return row[a] / row[b] if a in row and b in row else None

    top = ns[-1]
    targets = {
        "sync / plain, cheap, N=64 (target >= 0.8)": ratio("cheap/64", "sync", "plain"),
        f"async / ideal, io, N={top} (target >= 0.9)": ratio(f"io/{top}", "async", "ideal"),
        f"asyncio-bare / ideal, io, N={top} (event-loop ceiling)": ratio(f"io/{top}", "asyncio-bare", "ideal"),
        f"async / asyncio-envs, io, N={top} (gather of the envs' own coroutines)": ratio(
            f"io/{top}", "async", "asyncio-envs"
        ),
        f"gem-async / ideal, io, N={top}": ratio(f"io/{top}", "gem-async", "ideal"),
        "process / sync, cpu, N=8 (target >= 1.7 on 2 cores)": ratio("cpu/8", "process", "sync"),
        "process / sync, cpu, N=64": ratio("cpu/64", "process", "sync"),
        f"process / sync, cpu, N={top}": ratio(f"cpu/{top}", "process", "sync"),
        "sync / gem-sync, cheap, N=64": ratio("cheap/64", "sync", "gem-sync"),
        "async / gem-async, io, N=64": ratio("io/64", "async", "gem-async"),
    }
    ratios = Table(title="Ratios")
    ratios.add_column("ratio")
    ratios.add_column("value", justify="right")
    for name, value in targets.items():
        ratios.add_row(name, "-" if value is None else f"{value:.2f}")
    for name, value in paired.items():
        ratios.add_row(f"{name}: median of {args.paired_rounds} interleaved rounds", f"{value:.2f}")
    for name, value in accounting.items():
        ratios.add_row(f"cpu, N=64: {name}", f"{value:,.2f}")
    for method, secs in starts.items():
        ratios.add_row(f"process backend start, {method} (s, 8 envs)", f"{secs:.2f}")
    console.print(ratios)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "machine": {
            "cores": cores,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_1m_before_after": [load_before[0], os.getloadavg()[0]],
        },
        "cpu_iterations": WORKLOADS["cpu"][1]["iterations"],
        "quick": args.quick,
        "budget_s": budget,
        "steps_per_s": results,
        "ratios": targets,
        "paired_target_ratios": paired,
        "cpu_accounting_n64": accounting,
        "process_start_s": starts,
    }
    (RESULTS / "env_throughput.json").write_text(json.dumps(out, indent=2))
    console.print(f"wrote {RESULTS / 'env_throughput.json'}")


if __name__ == "__main__":
    main()
