"""Env-server throughput and latency over loopback: `gymverse serve` vs an AgentGym-style server vs the in-process pool.

Every runner steps the same cheap env (`vectest:Count` at complexity 10: ~5 µs of Python per step, episodes of
5..40 steps, action ``\\boxed{1}``) with N = 1, 64 and 1,000 concurrent sessions, each session resetting when its
episode ends:

* ``gymverse-batch``  `gymverse serve` in its own process; the N sessions are stepped through ``POST /v1/batch``
                      (up to 128 calls per request, one kept-alive connection per 128 sessions); resets of finished
                      episodes ride in the next batch.
* ``gymverse``        the same server, one request per step, one kept-alive connection per session.
* ``agentgym-style``  AgentGym's server design, reimplemented minimally from its protocol: one uvicorn process,
                      sync FastAPI handlers in the thread pool, pydantic bodies, integer ids from a counter under one
                      global lock, errors as HTTP 200 ``{"error"}``; ``/create`` ``/reset`` ``/step`` ``/close``,
                      one request per step, one kept-alive connection per session.
* ``in-process``      `EnvPool` sessions in this process, no HTTP: the ceiling of what the server wraps.

Latency is per step as its session sees it (a batch's steps all take that batch's round trip). The HTTP load
generator is a minimal asyncio HTTP/1.1 keep-alive client shared by all HTTP runners, so only the servers differ.
After the N = 1,000 runs every session is closed and the server is checked for leaked sessions and file
descriptors. Writes ``benchmarks/results/env_server.json`` and a plot ``env_server.png``.

    uv run python benchmarks/env_server.py [--seconds 3] [--ns 1,64,1000]
"""

# No `from __future__ import annotations`: FastAPI must see the baseline's request models, defined in a function.
import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
ENV_ID = "vectest:Count"
COMPLEXITY = 10
ACTION = r"\boxed{1}"
BATCH = 128


# ------------------------------------------------------------------------------------------ AgentGym-style baseline
def agentgym_style_app(env_id: str = ENV_ID, complexity: int | None = COMPLEXITY) -> Any:
    """AgentGym's server design (see e.g. agentenv-textcraft's server.py / env_wrapper.py), minimally.

    Serves `env_id` (at `complexity`; None: the env's default level) on AgentGym's routes: ``/create``,
    ``/reset``, ``/step``, ``/close`` and ``GET /observation?id=``.
    """
    env_kwargs = {} if complexity is None else {"complexity": complexity}
    import gymverse
    import gymverse.testing.vectest
    from fastapi import FastAPI
    from pydantic import BaseModel

    class StepRequestBody(BaseModel):
        id: int
        action: str

    class ResetRequestBody(BaseModel):
        id: int
        data_idx: int | None = 0

    class CloseRequestBody(BaseModel):
        id: int

    class Wrapper:
        def __init__(self) -> None:
            self._max_id = 0
            self._lock = threading.Lock()
            self.env: dict[int, Any] = {}
            self.info: dict[int, dict[str, Any]] = {}

        def create(self) -> dict[str, Any]:
            try:
                with self._lock:
                    idx = self._max_id
                    self._max_id += 1
                env = gymverse.make(env_id, **env_kwargs)
                ob, _ = env.reset(seed=idx)
                self.env[idx] = env
                self.info[idx] = {"observation": ob, "done": False, "reward": 0, "deleted": False}
                return {"id": idx, "observation": ob, "done": False, "reward": 0}
            except Exception as e:
                return {"error": f"{e}"}

        def step(self, idx: int, action: str) -> dict[str, Any]:
            try:
                ob, reward, terminated, truncated, _ = self.env[idx].step(action)
                payload = {"observation": ob, "reward": reward, "done": terminated or truncated}
                self.info[idx].update(payload)
                return payload
            except Exception as e:
                return {"error": f"{e}"}

        def reset(self, idx: int, data_idx: int | None) -> dict[str, Any]:
            try:
                ob, _ = self.env[idx].reset(seed=data_idx)
                self.info[idx].update({"observation": ob, "done": False, "reward": 0})
                return {"id": idx, "observation": ob, "done": False, "reward": 0}
            except Exception as e:
                return {"error": str(e)}

        def observation(self, idx: int) -> Any:
            try:
                return self.info[idx]["observation"]
            except Exception as e:
                return {"error": str(e)}

        def close(self, idx: int) -> dict[str, Any]:
            try:
                self.env.pop(idx).close()
                self.info[idx]["deleted"] = True
                return {"closed": True}
            except Exception as e:
                return {"error": str(e)}

    server = Wrapper()
    app = FastAPI()

    @app.post("/create")
    def create() -> dict[str, Any]:
        return server.create()

    @app.post("/step")
    def step(body: StepRequestBody) -> dict[str, Any]:
        return server.step(body.id, body.action)

    @app.post("/reset")
    def reset(body: ResetRequestBody) -> dict[str, Any]:
        return server.reset(body.id, body.data_idx)

    @app.post("/close")
    def close(body: CloseRequestBody) -> dict[str, Any]:
        return server.close(body.id)

    @app.get("/observation")
    def observation(id: int) -> Any:
        return server.observation(id)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "active_sessions": sum(not i["deleted"] for i in server.info.values())}

    return app


# ------------------------------------------------------------------------------------------ load generator
class Conn:
    """One kept-alive HTTP/1.1 connection (requests with a JSON body; responses with Content-Length).

    Like any HTTP client, it reconnects when the server closed the idle connection (uvicorn's keep-alive timeout)
    before the request reached it.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.host = f"127.0.0.1:{port}"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.reconnects = 0

    @classmethod
    async def open(cls, port: int) -> "Conn":
        conn = cls(port)
        await conn._connect()
        return conn

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 24)

    async def call(self, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
        body = b"" if payload is None else json.dumps(payload).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
        request = (head + f"content-length: {len(body)}\r\n\r\n").encode() + body
        for attempt in (0, 1):
            assert self.reader is not None and self.writer is not None
            self.writer.write(request)
            status_line = await self.reader.readline()
            if status_line or attempt:
                break
            self.writer.close()  # closed while idle: the request never reached the server
            self.reconnects += 1
            await self._connect()
        status = int(status_line.split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, json.loads(await self.reader.readexactly(length)) if length else None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _check(status: int, body: Any) -> Any:
    if status >= 400 or (isinstance(body, dict) and body.get("error")):
        raise RuntimeError(f"HTTP {status}: {body}")
    return body


async def _timed(seconds: float, worker: Any, n_workers: int) -> tuple[int, list[float], float]:
    """Run `n_workers` copies of ``worker(stop, latencies) -> steps`` for `seconds`; (steps, latencies, elapsed)."""
    stop = asyncio.Event()
    latencies: list[float] = []
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(worker(k, stop, latencies)) for k in range(n_workers)]
    await asyncio.sleep(seconds)
    stop.set()
    steps = sum(await asyncio.gather(*tasks))
    return steps, latencies, time.perf_counter() - t0


async def run_gymverse(
    port: int, n: int, seconds: float, batch: bool, env_id: str = ENV_ID, complexity: int | None = COMPLEXITY
) -> dict[str, Any]:
    """Open n sessions, step them (batched or one request per step) for `seconds`, close them."""
    conns = [await Conn.open(port) for _ in range(-(-n // BATCH) if batch else n)]
    sids = []
    for i in range(n):
        body: dict[str, Any] = {"env_id": env_id, "seed": i}
        if complexity is not None:
            body["complexity"] = complexity
        sids.append(_check(*await conns[i % len(conns)].call("POST", "/v1/sessions", body))["session_id"])
    for k, sid in enumerate(sids):
        _check(*await conns[k % len(conns)].call("POST", f"/v1/sessions/{sid}/reset", {}))

    async def batched(k: int, stop: asyncio.Event, latencies: list[float]) -> int:
        mine = sids[k * BATCH : (k + 1) * BATCH]
        ended: set[str] = set()
        steps = 0
        while not stop.is_set():
            calls = [
                {"op": "reset", "session_id": s} if s in ended else {"session_id": s, "action": ACTION} for s in mine
            ]
            t = time.perf_counter()
            results = _check(*await conns[k].call("POST", "/v1/batch", {"calls": calls}))["results"]
            dt = time.perf_counter() - t
            ended.clear()
            for r in results:
                if not r["ok"]:
                    raise RuntimeError(r)
                if r["op"] == "step":
                    steps += 1
                    latencies.append(dt)
                    if r["terminated"] or r["truncated"]:
                        ended.add(r["session_id"])
        return steps

    async def single(k: int, stop: asyncio.Event, latencies: list[float]) -> int:
        steps, conn, sid = 0, conns[k], sids[k]
        while not stop.is_set():
            t = time.perf_counter()
            r = _check(*await conn.call("POST", f"/v1/sessions/{sid}/step", {"action": ACTION}))
            latencies.append(time.perf_counter() - t)
            steps += 1
            if r["terminated"] or r["truncated"]:
                _check(*await conn.call("POST", f"/v1/sessions/{sid}/reset", {}))
        return steps

    steps, lat, elapsed = await _timed(seconds, batched if batch else single, len(conns))
    _, metrics = await conns[0].call("GET", "/metrics")
    for k, sid in enumerate(sids):
        _check(*await conns[k % len(conns)].call("DELETE", f"/v1/sessions/{sid}"))
    _, after = await conns[0].call("GET", "/metrics")
    reconnects = sum(c.reconnects for c in conns)
    for c in conns:
        c.close()
    return {
        "steps": steps,
        "elapsed": elapsed,
        "latencies": lat,
        "connections": len(conns),
        "active_during": metrics["active_sessions"],
        "active_after_close": after["active_sessions"],
        "server_http_errors": after["http_errors"],
        "reconnects": reconnects,
        "server_env_errors": after["env_errors_total"],
    }


async def run_agentgym(port: int, n: int, seconds: float, prefix: str = "") -> dict[str, Any]:
    """AgentGym's client pattern: /create per env, then /step (and /reset when done), one request per step.

    `prefix` is where the routes are mounted (``/agentgym/<env id>`` for `gymverse serve`'s AgentGym routes).
    """
    conns = [await Conn.open(port) for _ in range(n)]
    ids = [_check(*await conns[i].call("POST", f"{prefix}/create"))["id"] for i in range(n)]

    async def single(k: int, stop: asyncio.Event, latencies: list[float]) -> int:
        steps, conn, idx = 0, conns[k], ids[k]
        while not stop.is_set():
            t = time.perf_counter()
            r = _check(*await conn.call("POST", f"{prefix}/step", {"id": idx, "action": ACTION}))
            latencies.append(time.perf_counter() - t)
            steps += 1
            if r["done"]:
                _check(*await conn.call("POST", f"{prefix}/reset", {"id": idx, "data_idx": None}))
        return steps

    steps, lat, elapsed = await _timed(seconds, single, n)
    for k, idx in enumerate(ids):
        _check(*await conns[k].call("POST", f"{prefix}/close", {"id": idx}))
    _, after = await conns[0].call("GET", "/health")
    reconnects = sum(c.reconnects for c in conns)
    for c in conns:
        c.close()
    return {
        "steps": steps,
        "elapsed": elapsed,
        "latencies": lat,
        "connections": n,
        "active_after_close": after["active_sessions"],
        "reconnects": reconnects,
    }


async def run_in_process(
    n: int, seconds: float, env_id: str = ENV_ID, complexity: int | None = COMPLEXITY
) -> dict[str, Any]:
    """EnvPool sessions with the server's settings (30 s step timeout), no HTTP."""
    from gymverse.vector import EnvPool

    with EnvPool(max(n, 1), step_timeout=30.0) as pool:
        sessions = [await pool.session(env_id, seed=i, complexity=complexity) for i in range(n)]
        for s in sessions:
            await s.reset()

        async def single(k: int, stop: asyncio.Event, latencies: list[float]) -> int:
            steps, session = 0, sessions[k]
            while not stop.is_set():
                t = time.perf_counter()
                r = await session.step(ACTION)
                latencies.append(time.perf_counter() - t)
                steps += 1
                if r.terminated or r.truncated:
                    await session.reset()
            return steps

        steps, lat, elapsed = await _timed(seconds, single, n)
        for s in sessions:
            await s.close()
    return {"steps": steps, "elapsed": elapsed, "latencies": lat, "connections": 0}


# ------------------------------------------------------------------------------------------ processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server on port {port} did not start")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve_gymverse(port: int) -> subprocess.Popen[bytes]:
    """`gymverse serve` serving the vectest envs."""
    cmd = [
        sys.executable,
        "-m",
        "gymverse.cli",
        "serve",
        "--port",
        str(port),
        "--import",
        "gymverse.testing.vectest",
        "--envs",
        "vectest",
        "--log-level",
        "warning",
    ]
    return _start(cmd, port)


def serve_agentgym(port: int, env_id: str = ENV_ID, complexity: int | None = COMPLEXITY) -> subprocess.Popen[bytes]:
    """The AgentGym-style baseline serving `env_id` in its own uvicorn process."""
    env = json.dumps([env_id, complexity])
    return _start([sys.executable, __file__, "--agentgym-server", str(port), "--agentgym-env", env], port)


def summarize(res: dict[str, Any], cpu_s: float) -> dict[str, Any]:
    """steps/s, latency percentiles (ms) and server CPU per 1k steps of one run."""
    lat = np.asarray(res.pop("latencies"), dtype=np.float64) * 1e3
    out = {k: v for k, v in res.items()}
    out["steps_per_s"] = res["steps"] / res["elapsed"]
    out["p50_ms"] = float(np.percentile(lat, 50)) if lat.size else float("nan")
    out["p99_ms"] = float(np.percentile(lat, 99)) if lat.size else float("nan")
    out["server_cpu_ms_per_1k_steps"] = 1e6 * cpu_s / max(res["steps"], 1)
    return out


def median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over interleaved rounds of each number (the machine is shared: single runs are noisy)."""
    row = dict(rounds[-1])
    for key in ("steps_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_1k_steps"):
        row[key] = float(np.median([r[key] for r in rounds]))
        row[f"{key}_rounds"] = [round(r[key], 2) for r in rounds]
    return row


def plot(results: dict[str, dict[str, dict[str, Any]]], path: Path) -> None:
    """Bars of steps/s and p99 per runner and N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runners = list(results)
    ns = sorted({int(n) for r in results.values() for n in r})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(runners)
    for k, runner in enumerate(runners):
        xs = [i + k * width for i in range(len(ns))]
        axes[0].bar(xs, [results[runner].get(str(n), {}).get("steps_per_s", 0) for n in ns], width, label=runner)
        axes[1].bar(xs, [results[runner].get(str(n), {}).get("p99_ms", 0) for n in ns], width, label=runner)
    for ax, title in zip(axes, ("steps/s (higher is better)", "p99 latency per step, ms (log)")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ns))], [f"N={n}" for n in ns])
        ax.set_title(title)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Env server on loopback, {os.cpu_count()} cores, cheap env ({ENV_ID})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Run every runner x N and print/write the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    ap.add_argument("--ns", default="1,64,1000", help="concurrent sessions (comma-separated)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per runner and N (medians reported)")
    ap.add_argument("--agentgym-server", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--agentgym-env", default=json.dumps([ENV_ID, COMPLEXITY]), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.agentgym_server is not None:
        import uvicorn

        uvicorn.run(
            agentgym_style_app(*json.loads(args.agentgym_env)),
            host="127.0.0.1",
            port=args.agentgym_server,
            log_level="warning",
            access_log=False,
        )
        return
    import gymverse.testing.vectest  # noqa: F401
    from rich.console import Console
    from rich.table import Table

    # The in-process runner and the load generator get what `gymverse serve` does (see gymverse.server.runner.serve).
    gc.collect()
    gc.freeze()
    console = Console(width=None if sys.stdout.isatty() else 150, stderr=False)
    ns = [int(x) for x in args.ns.split(",")]
    load_before = os.getloadavg()
    results: dict[str, dict[str, dict[str, Any]]] = {
        "gymverse-batch": {},
        "gymverse": {},
        "agentgym-style": {},
        "in-process": {},
    }
    leaks: dict[str, Any] = {}
    gv_port, ag_port = _free_port(), _free_port()
    gv, ag = serve_gymverse(gv_port), serve_agentgym(ag_port)
    try:
        time.sleep(1.0)
        fds_idle = _fds(gv.pid)
        for n in ns:
            runs = {
                "gymverse-batch": (gv.pid, lambda n=n: run_gymverse(gv_port, n, args.seconds, batch=True)),
                "gymverse": (gv.pid, lambda n=n: run_gymverse(gv_port, n, args.seconds, batch=False)),
                "agentgym-style": (ag.pid, lambda n=n: run_agentgym(ag_port, n, args.seconds)),
                "in-process": (os.getpid(), lambda n=n: run_in_process(n, args.seconds)),
            }
            rounds: dict[str, list[dict[str, Any]]] = {r: [] for r in runs}
            for k in range(args.rounds):  # interleaved, so a burst of load elsewhere hits every runner alike
                for runner, (pid, make_run) in runs.items():
                    console.print(f"[dim]running {runner}, N={n}, round {k + 1}/{args.rounds} ...[/dim]")
                    cpu0 = _cpu_seconds(pid)
                    res = asyncio.run(make_run())
                    rounds[runner].append(summarize(res, _cpu_seconds(pid) - cpu0))
            for runner, measured in rounds.items():
                row = results[runner][str(n)] = median_row(measured)
                console.print(
                    f"{runner:>15} N={n:<5} {row['steps_per_s']:>9,.0f} steps/s  p50 {row['p50_ms']:7.2f} ms"
                    f"  p99 {row['p99_ms']:7.2f} ms  server CPU {row['server_cpu_ms_per_1k_steps']:6.0f} ms/1k steps"
                )
        time.sleep(1.0)  # let the server notice the closed connections
        leaks = {"server_fds_idle_before": fds_idle, "server_fds_after_all_closed": _fds(gv.pid)}
    finally:
        _stop(gv)
        _stop(ag)
    table = Table(
        title=f"Env server, loopback, {ENV_ID} ({os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f})"
    )
    cols = (
        "runner",
        "N",
        "conns",
        "steps/s",
        "p50 ms",
        "p99 ms",
        "CPU ms/1k steps",
        "vs agentgym-style",
        "vs in-process",
    )
    for col in cols:
        table.add_column(col, justify="right" if col != "runner" else "left")
    for runner, rows in results.items():
        for n, row in rows.items():
            ag_rate = results["agentgym-style"].get(n, {}).get("steps_per_s")
            ip_rate = results["in-process"].get(n, {}).get("steps_per_s")
            table.add_row(
                runner,
                n,
                str(row["connections"]),
                f"{row['steps_per_s']:,.0f}",
                f"{row['p50_ms']:.2f}",
                f"{row['p99_ms']:.2f}",
                f"{row['server_cpu_ms_per_1k_steps']:.0f}",
                f"{row['steps_per_s'] / ag_rate:.2f}x" if ag_rate else "-",
                f"{row['steps_per_s'] / ip_rate:.2f}x" if ip_rate else "-",
            )
    console.print(table)
    for n in ns:
        row = results["gymverse"][str(n)]
        console.print(
            f"N={n}: sessions open during the run {row['active_during']}, after close "
            f"{row['active_after_close']}; server HTTP errors {row['server_http_errors'] or 'none'}"
        )
    console.print(f"server fds: {leaks}")
    if "64" in results["gymverse-batch"]:
        row = results["gymverse-batch"]["64"]
        console.print(
            f"target, cheap env, 64 sessions: {row['steps_per_s']:,.0f} steps/s (target >= 5,000), "
            f"p99 {row['p99_ms']:.1f} ms (target < 20 ms), median of {args.rounds} rounds"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_1m_before_after": [load_before[0], os.getloadavg()[0]],
        },
        "env": ENV_ID,
        "complexity": COMPLEXITY,
        "seconds": args.seconds,
        "batch": BATCH,
        "results": results,
        "leaks": leaks,
    }
    (RESULTS / "env_server.json").write_text(json.dumps(out, indent=2))
    plot(results, RESULTS / "env_server.png")
    console.print(f"wrote {RESULTS / 'env_server.json'} and {RESULTS / 'env_server.png'}")


if __name__ == "__main__":
    main()
