"""`gymverse.client`: remote envs by id in `make`, `make_vec` (every local backend), `EnvPool` and rollout sessions."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import gymverse
import numpy as np
import pytest
from gymverse.client import RemoteEnv
from gymverse.pool import EnvPool
from gymverse.protocol import is_env_like
from gymverse.registry import RegistryError
from gymverse.vector import make_vec

ACTIONS = [r"\boxed{1 2 3 4}", r"\boxed{2 2 1 1}", "junk", r"\boxed{3 3 3 3}"]


def _transcript(venv: Any, steps: int = 14) -> list[Any]:
    out: list[Any] = [venv.reset()]
    for t in range(steps):
        res = venv.step([ACTIONS[(t + i) % len(ACTIONS)] for i in range(venv.num_envs)])
        out.append((res.observations, res.rewards.tolist(), res.terminated.tolist(), res.truncated.tolist(), res.infos))
    venv.close()
    return out


@pytest.mark.parametrize("backend", ["sync", "async", "process"])
def test_make_vec_over_remote_envs_gives_the_local_transcript(start_server: Any, backend: str) -> None:
    srv = start_server()
    opts = {"num_workers": 2} if backend == "process" else None
    local = _transcript(make_vec("game:Mastermind", 3, backend=backend, seed=7, complexity=4, backend_options=opts))
    remote_id = f"remote+{srv.url}/game:Mastermind"
    remote = _transcript(make_vec(remote_id, 3, backend=backend, seed=7, complexity=4, backend_options=opts))
    assert remote == local
    assert any(info.get("final_info") for step in local[1:] for info in step[4])  # episodes ended and autoreset
    assert srv.manager.metrics.sessions_created == 3 and len(srv.manager.leases) == 0  # closed with the venv


def test_remote_env_is_env_like_and_behaves_like_the_local_env(start_server: Any) -> None:
    srv = start_server()
    env = gymverse.make(f"remote+{srv.url}/game:Mastermind", complexity=2, max_turns=3)
    local = gymverse.make("game:Mastermind", complexity=2, max_turns=3)
    # a proxy, not an Env with a skipped __init__; recognising it opened no session (no property ran)
    assert is_env_like(env) and not isinstance(env, gymverse.Env)
    assert isinstance(env, RemoteEnv) and env.session_id is None
    assert env.metadata == local.metadata
    assert env.reset(seed=1) == local.reset(seed=1)
    assert env.params == {"pegs": 3, "colors": 5, "max_turns": 10} and env.max_turns == 3
    env.set_complexity(9)
    assert env.complexity == 9
    assert [env.step(a) for a in ACTIONS[:3]] == [local.step(a) for a in ACTIONS[:3]]  # truncated at turn 3
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step("x")
    assert env.reset()[1]["complexity"] == 9 and env.params["pegs"] == 5
    with pytest.raises(NotImplementedError, match="oracle"):
        env.solve()
    env.close()
    env.close()
    assert len(srv.manager.leases) == 0


def test_bad_remote_ids_are_reported() -> None:
    for bad in ("remote+http://host:1/not-an-id", "remote+ftp://host/game:Mastermind", "remote+game:Mastermind"):
        with pytest.raises(RegistryError, match="must look like 'remote\\+http://host:port/family:Name'"):
            gymverse.make(bad)


def test_pool_and_rollout_sessions_over_remote_envs(start_server: Any) -> None:
    from gymverse.client import RemoteSession
    from gymverse.rollout import Session

    srv = start_server()
    rid = f"remote+{srv.url}/game:Mastermind"
    local = gymverse.make("game:Mastermind", complexity=3)
    obs0, _ = local.reset(seed=4)
    expected = [local.step(a) for a in ACTIONS]

    async def main() -> None:
        with EnvPool(8) as pool:
            session = await pool.session(rid, seed=4, complexity=3)
            assert (await session.reset())[0] == obs0
            assert [await session.step(a) for a in ACTIONS] == expected
            await session.close()
        rs = RemoteSession.open(srv.url, "game:Mastermind")
        assert isinstance(rs, Session)
        rs.set_complexity(3)
        obs, info = await rs.reset(seed=4)
        assert obs == obs0 and info["complexity"] == 3
        assert [await rs.step(a) for a in ACTIONS] == [tuple(e) for e in expected]
        await rs.close()
        await rs.close()  # idempotent
        async with RemoteSession.open(srv.url, "game:Mastermind", complexity=3) as again:
            assert (await again.reset(seed=4))[0] == obs0

    asyncio.run(main())
    assert len(srv.manager.leases) == 0


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_hundreds_of_concurrent_sessions_leave_no_session_or_fd_behind(start_server: Any) -> None:
    from gymverse.client import AsyncRemoteClient

    srv = start_server()
    n = 120
    baseline = _open_fds()

    async def main() -> None:
        async with AsyncRemoteClient(srv.url) as client:
            created = await asyncio.gather(*(client.create_session("vectest:Count", seed=i) for i in range(n)))
            ids = [c["session_id"] for c in created]
            assert len(set(ids)) == n
            await asyncio.gather(*(client.reset(sid) for sid in ids))
            for _ in range(3):
                results = (await client.step_many([(sid, r"\boxed{1}") for sid in ids]))["results"]
                assert all(r["ok"] and r["env_error"] is None for r in results)
            assert (await client.metrics())["active_sessions"] == n
            await asyncio.gather(*(client.close_session(sid) for sid in ids))

    asyncio.run(main())
    assert len(srv.manager.leases) == 0 and srv.manager.metrics.sessions_closed == n
    deadline = time.monotonic() + 5
    while _open_fds() > baseline and time.monotonic() < deadline:  # the server notices the closed connections
        time.sleep(0.05)
    assert _open_fds() <= baseline


def test_remote_envs_step_like_local_ones_in_numbers(start_server: Any) -> None:
    srv = start_server()
    venv = make_vec(f"remote+{srv.url}/vectest:Count", 2, seed=0)
    ref = make_vec("vectest:Count", 2, seed=0)
    venv.reset()
    ref.reset()
    for _ in range(20):
        a, b = venv.step([r"\boxed{2}", r"\boxed{3}"]), ref.step([r"\boxed{2}", r"\boxed{3}"])
        assert np.array_equal(a.rewards, b.rewards) and a.observations == b.observations
    venv.close()
    ref.close()
