"""Env layer vs peers: GymVerse sessions and `gymverse serve` vs GEM's vector envs vs an AgentGym-style HTTP server.

The same env code runs in every arm (GEM steps it through a thin GEM ``Env`` adapter, the servers host it), so only
the env layer differs. Two workloads, each at its default level (episodes of 5..10 steps, action ``\\boxed{1}``):

* ``cheap``  `vectest:Count`: ~5 µs of Python per step: what the layer itself costs
* ``io``     `vectest:SleepIO`: every step waits 1 ms (a tool call, a subprocess): how well it overlaps waiting

Arms, each with 1, 8 and 64 concurrent episodes (each resetting when its episode ends):

* ``gymverse sessions``         `EnvPool` sessions in this process: the path the adapters' rollouts use
* ``gymverse make_vec sync`` / ``gymverse make_vec async``  GymVerse's vector envs (`make_vec`), the like-for-like
                                peer of GEM's vector envs: one ``step`` call steps all N
* ``gymverse serve``            `gymverse serve` over loopback, one ``POST /v1/sessions/{id}/step`` per step
* ``gymverse serve /v1/batch``  the same server, all sessions' steps in one ``POST /v1/batch`` per round trip
* ``gymverse serve, AgentGym routes``  the same server driven by AgentGym's client protocol (``/agentgym/<id>/step``)
* ``agentgym-style server``     AgentGym's server design (FastAPI, sync handlers, ``/create /reset /step
                                /observation /close``, one HTTP call per step; `benchmarks/env_server.py`)
* ``gem SyncVectorEnv`` / ``gem AsyncVectorEnv``  gem-llm's vector envs, in a throwaway venv
                                (`benchmarks/env_throughput.py` builds it and runs GEM as a subprocess)

All HTTP arms share one minimal asyncio keep-alive client (one connection per episode), so only the servers differ.
Per-step latency is what one episode waits for one step (for a vector env: its ``step`` call). Medians over
interleaved rounds; ratios are medians of the per-round ratios. Writes ``env_layer.json``.

    uv run python benchmarks/frameworks/bench_env_layer.py [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the env-server and GEM machinery

import env_server as es
import env_throughput as et
from common import Target, base_parser, interleaved, print_table, progress, rounds_of, write_result
from rich.console import Console
from summary import paired_ratio

WORKLOADS: dict[str, tuple[str, dict[str, Any]]] = {"cheap": ("vectest:Count", {}), "io": ("vectest:SleepIO", {})}
NS = (1, 8, 64)
AGENTGYM = "agentgym-style server"
GEM = {"gem-sync": "gem SyncVectorEnv", "gem-async": "gem AsyncVectorEnv"}
REFERENCES = (AGENTGYM, GEM["gem-async"])
FRAMEWORK = {AGENTGYM: "agentgym-style", **{arm: "gem" for arm in GEM.values()}}
Metrics = dict[str, float]


def _key(workload: str, n: int, metric: str) -> str:
    return f"{workload}/{n}/{metric}"


def _http_arm(run: Callable[[str, int], Any], pid: Callable[[str], int]) -> Callable[[], Metrics]:
    """An arm stepping every workload x N through `run(workload, n)`, with the serving process's CPU per 1k steps."""

    def arm() -> Metrics:
        out: Metrics = {}
        for workload in WORKLOADS:
            for n in NS:
                cpu0 = es._cpu_seconds(pid(workload))
                res = es.summarize(asyncio.run(run(workload, n)), es._cpu_seconds(pid(workload)) - cpu0)
                if res.get("active_after_close"):
                    raise RuntimeError(f"{workload}/N={n}: {res['active_after_close']} sessions left open after close")
                for metric in ("steps_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_1k_steps"):
                    out[_key(workload, n, metric)] = float(res[metric])
        return out

    return arm


def _vec_arm(backend: str, budget: float) -> Callable[[], Metrics]:
    """GymVerse's `make_vec` on `backend` for every workload x N; latency = the median ``step`` call."""

    def arm() -> Metrics:
        out: Metrics = {}
        for workload, (env_id, kwargs) in WORKLOADS.items():
            for n in NS:
                times: list[float] = []
                out[_key(workload, n, "steps_per_s")] = et.gymverse_vec(
                    env_id, kwargs, n, backend, budget, os.cpu_count() or 1, times
                )
                out[_key(workload, n, "p50_ms")] = 1e3 * statistics.median(times)
        return out

    return arm


def _gem_arm(console: Console, budget: float) -> Callable[[], Metrics]:
    """Both GEM vector envs for every workload x N, in one subprocess in GEM's venv."""

    def arm() -> Metrics:
        measured = et.run_gem(console, list(NS), budget, WORKLOADS)
        if not measured:
            raise RuntimeError("the GEM subprocess failed (see above)")
        out: Metrics = {}
        for case, row in measured.items():
            workload, n = case.split("/")
            for runner in GEM:
                out[_key(workload, int(n), f"{runner}/steps_per_s")] = row[runner]
                out[_key(workload, int(n), f"{runner}/p50_ms")] = row[f"{runner} p50_ms"]
        return out

    return arm


def _gem_version() -> str:
    """gem-llm's version in its throwaway venv."""
    probe = "from importlib.metadata import version; print(version('gem-llm'))"
    proc = subprocess.run([str(et.GEM_VENV / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def _rows(results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per arm x workload x N (GEM's two runners split out of their shared subprocess)."""
    rows: list[dict[str, Any]] = []
    for workload in WORKLOADS:
        for n in NS:
            for arm, medians in results.items():
                parts = {arm: ""} if arm != "gem" else {GEM[r]: f"{r}/" for r in GEM}
                for name, prefix in parts.items():
                    row: dict[str, Any] = {"framework": FRAMEWORK.get(name, "gymverse"), "case": f"{workload} N={n}"}
                    row["arm"] = name
                    for metric in ("steps_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_1k_steps"):
                        key = _key(workload, n, prefix + metric)
                        if key in medians:
                            row[metric] = medians[key]
                            row[f"{metric}_rounds"] = medians[f"{key}_rounds"]
                    if "steps_per_s" in row:
                        rows.append(row)
    for row in rows:  # throughput ratios against the references, paired by round
        for ref in REFERENCES:
            other = next((r for r in rows if r["case"] == row["case"] and r["arm"] == ref), None)
            if other is not None and row is not other:
                row[f"vs {ref}"] = paired_ratio(row, other, "steps_per_s")
    return rows


def _targets(rows: list[dict[str, Any]]) -> list[Target]:
    """The env-server targets (cheap env, 64 sessions, `/v1/batch`): >= 5,000 steps/s and p99 < 20 ms."""
    row = next((r for r in rows if r["arm"] == "gymverse serve /v1/batch" and r["case"] == "cheap N=64"), None)
    if row is None:
        return []
    note = "the env server's target: 64 sessions of a cheap env over loopback, batched"
    return [
        Target(
            "gymverse serve /v1/batch, cheap, N=64: steps/s",
            row["steps_per_s"],
            5000.0,
            "steps/s >=",
            row["steps_per_s"] >= 5000.0,
            note,
        ),
        Target(
            "gymverse serve /v1/batch, cheap, N=64: p99 per step",
            row["p99_ms"],
            20.0,
            "ms <",
            row["p99_ms"] < 20.0,
            note,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Start the servers, run the interleaved rounds, print and write the results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--no-gem", action="store_true", help="skip GEM (no venv is built)")
    args = parser.parse_args(argv)
    if args.gpu:
        progress("--gpu: the env layer runs no model; measured on the CPU as without --gpu")
    budget = 0.3 if args.quick else 1.0
    rounds = rounds_of(args)
    console = Console(stderr=True, width=120)
    gem_ok = not args.no_gem and et.gem_python(console) is not None
    gv_port = es._free_port()
    ag_ports = {w: es._free_port() for w in WORKLOADS}
    progress(f"starting gymverse serve on :{gv_port} and one AgentGym-style server per workload")
    servers = {"gymverse": es.serve_gymverse(gv_port)}
    try:
        for w, (env_id, _) in WORKLOADS.items():
            servers[w] = es.serve_agentgym(ag_ports[w], env_id, None)
        env = {w: env_id for w, (env_id, _) in WORKLOADS.items()}
        gv_pid, self_pid = (lambda _w: servers["gymverse"].pid), (lambda _w: os.getpid())
        arms: dict[str, Callable[[], Metrics]] = {
            "gymverse sessions": _http_arm(lambda w, n: es.run_in_process(n, budget, env[w], None), self_pid),
            "gymverse make_vec sync": _vec_arm("sync", budget),
            "gymverse make_vec async": _vec_arm("async", budget),
            "gymverse serve": _http_arm(lambda w, n: es.run_gymverse(gv_port, n, budget, False, env[w], None), gv_pid),
            "gymverse serve /v1/batch": _http_arm(
                lambda w, n: es.run_gymverse(gv_port, n, budget, True, env[w], None), gv_pid
            ),
            "gymverse serve, AgentGym routes": _http_arm(
                lambda w, n: es.run_agentgym(gv_port, n, budget, prefix=f"/agentgym/{env[w]}"), gv_pid
            ),
            AGENTGYM: _http_arm(lambda w, n: es.run_agentgym(ag_ports[w], n, budget), lambda w: servers[w].pid),
        }
        if gem_ok:
            arms["gem"] = _gem_arm(console, budget)
        results = interleaved(arms, rounds, label="env layer")
    finally:
        for proc in servers.values():
            es._stop(proc)
    rows = _rows(results)
    columns = ["framework", "case", "arm", "steps_per_s", "p50_ms", "p99_ms", *(f"vs {r}" for r in REFERENCES)]
    print_table(f"Env layer: steps/s and per-step latency, medians of {rounds} interleaved rounds", rows, columns)
    targets = _targets(rows)
    for t in targets:
        print(f"target {t.name}: {t.value:,.1f} ({t.unit} {t.limit:g}) {'met' if t.met else 'MISSED'}")
    if not gem_ok:
        print("GEM not measured (--no-gem, or gem-llm could not be installed)")
    write_result(
        "env_layer",
        "Env layer: GymVerse sessions / gymverse serve vs GEM vector envs vs an AgentGym-style server",
        rows,
        args=args,
        plot_metric="steps_per_s",
        plot_label="env steps/s (higher is better)",
        lower_is_better=False,
        targets=targets,
        packages=("fastapi", "uvicorn"),
        extra={
            "baseline": AGENTGYM,
            "gem_llm": _gem_version() if gem_ok else "not measured",
            "workloads": WORKLOADS,
            "ns": list(NS),
            "seconds_per_run": budget,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
