"""Shared fixtures of the gymverse-core tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import gymverse.vector.testing  # noqa: F401 - the vectest: fixture envs (only tests register them)
import pytest
from hypothesis import settings

# No per-example time limit: on a loaded 2-core CI machine a 0.3 ms example can take 250 ms, and timings are never
# a pass/fail criterion here.
settings.register_profile("gymverse", deadline=None)
settings.load_profile("gymverse")

# Children inherit an ignored SIGINT (a test run started in the background or under nohup), and tests that
# interrupt a child (the sandbox host, `serve`, `view`) would then wait for nothing. A Python handler here is reset
# to the default in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Under `uv run`, Ray would start every worker through `uv run` as well (seconds per actor, and it packages the
# work tree); the venv already is the right environment. Ray reads this when it is first imported.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


#: Limits of the jobs run by `every_launcher`.
LAUNCHER_LIMITS = {"timeout": 20, "memory_mb": 512, "max_processes": 16}


@pytest.fixture(scope="module", params=["bwrap", "ctypes", "pool"])
def every_launcher(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A `Sandbox` for each fresh-job launcher (bubblewrap skipped where unusable) and a one-worker `SandboxPool`."""
    from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, isolation_support

    limits = SandboxLimits(**LAUNCHER_LIMITS)
    if request.param == "bwrap" and not isolation_support()["bwrap"]:
        pytest.skip("bubblewrap is not installed or not usable here")
    if request.param == "pool":
        with SandboxPool(1, limits) as pool:
            yield pool
    else:
        yield Sandbox(limits, backend=request.param)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray runtime (2 CPUs, no dashboard) shared by every test of the session that needs Ray."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def start_server() -> Iterator[Any]:
    """Start env servers (``start_server(port=0, **ServerConfig fields)``) on loopback; all stop after the test."""
    pytest.importorskip("fastapi")
    from gymverse.server import EnvServer, ServerConfig

    started: list[EnvServer] = []

    def start(port: int = 0, **config: Any) -> EnvServer:
        server = EnvServer(ServerConfig(**config), port=port).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# --------------------------------------------------------------------------------------- trajectory viewer fixture
class _CrashingSession:
    """A session whose env crashes on the first step (the collector records the episode with ``error``)."""

    env_id = "broken:Crashes"

    def set_complexity(self, level: int) -> None:
        pass

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return "You are in a broken env.", {"complexity": 1}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        raise RuntimeError("simulated env crash")

    async def close(self) -> None:
        pass


@pytest.fixture(scope="session")
def trajectory_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A run directory as the viewer meets it: sampled rollouts, collector output with a format error, a crashed
    episode and a hostile action, a non-trajectory JSONL, and a file with a corrupt line."""
    from gymverse.rollout import PlainRenderer, RolloutCollector, make_sessions, text_generate
    from gymverse.trajectory import Trajectory, Turn, write_jsonl
    from gymverse.viewer.sample import sample_trajectories

    root = tmp_path_factory.mktemp("run")
    (root / "rollouts").mkdir()
    write_jsonl(sample_trajectories(4, 30, seed=1), root / "rollouts" / "steps.jsonl")

    async def policy(prompt: str) -> str:
        turn = prompt.count("Observation:") - 1  # replies so far in this episode
        if turn == 0:
            return "I guess zebra-needle, no box this time"
        return f"Counting up from the bottom.\n\\boxed{{{turn}}}"

    sessions = [*make_sessions(["game:GuessTheNumber"] * 2), _CrashingSession()]
    trajs = RolloutCollector(text_generate(policy, PlainRenderer())).collect_sync(sessions, seeds=[11, 12, 13])
    write_jsonl(trajs, root / "collector.jsonl")

    (root / "notes.jsonl").write_text('{"idea": "not a trajectory"}\n', encoding="utf-8")
    attack = "</script><script>window.pwned=1</script><img src=x onerror='window.pwned=2'>"
    hostile = Trajectory("game:Hostile", 5, 2, [Turn("obs <b>bold</b>", attack, 0.0)])
    with open(root / "mixed.jsonl", "w", encoding="utf-8") as fh:
        fh.write(hostile.to_json() + "\n{not json\n")
    return root
