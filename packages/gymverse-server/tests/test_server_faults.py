"""`gymverse serve` under failure: raising and hanging envs, idle sessions, tokens, dropped connections, restarts."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import gymverse
import httpx
import pytest
from gymverse.client import RemoteClient, RemoteConnectionError, RemoteEnv, RemoteError

ONE = r"\boxed{1}"


def _reset(c: httpx.Client, env_id: str, **kwargs: Any) -> str:
    sid: str = c.post("/v1/sessions", json={"env_id": env_id, "seed": 0, "kwargs": kwargs}).json()["session_id"]
    assert c.post(f"/v1/sessions/{sid}/reset", json={}).json()["env_error"] is None
    return sid


def test_raising_env_ends_its_episode_with_the_error_and_the_server_lives_on(start_server: Any) -> None:
    srv = start_server()
    with httpx.Client(base_url=srv.url) as c:
        bad = _reset(c, "vectest:Faulty", fail_rate=1.0)
        good = _reset(c, "vectest:Count")
        r = c.post(f"/v1/sessions/{bad}/step", json={"action": ONE})
        assert r.status_code == 200
        res = r.json()
        assert res["truncated"] is True and res["terminated"] is False and res["reward"] == 0.0
        assert res["env_error"] == "ValueError: injected step failure at turn 1"
        assert res["info"]["error_type"] == "ValueError" and res["info"]["success"] is False
        assert "environment failed" in res["observation"]
        assert c.post(f"/v1/sessions/{bad}/step", json={"action": ONE}).status_code == 409  # the episode is over
        assert c.post(f"/v1/sessions/{bad}/reset", json={}).json()["env_error"] is None  # a fresh env takes over
        assert c.post(f"/v1/sessions/{good}/step", json={"action": ONE}).json()["env_error"] is None
        broken = c.post("/v1/sessions", json={"env_id": "vectest:Faulty", "kwargs": {"reset_fail_rate": 1.0}}).json()
        reset = c.post(f"/v1/sessions/{broken['session_id']}/reset", json={}).json()
        assert reset["env_error"] == "OSError: injected reset failure" and reset["info"]["reset_failed"] is True
        assert c.post(f"/v1/sessions/{broken['session_id']}/step", json={"action": ONE}).status_code == 409
        errors = c.get("/metrics").json()["env_errors"]
        assert errors == {"ValueError": 1, "OSError": 1}


def test_hanging_env_is_cut_off_by_the_step_timeout_while_others_are_served(start_server: Any) -> None:
    srv = start_server(step_timeout=0.4)
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        hung = _reset(c, "vectest:Hang", hang_at=1, hang_seconds=3.0)
        good = _reset(c, "vectest:Count")
        box: dict[str, Any] = {}

        def call() -> None:
            t0 = time.monotonic()
            box["res"] = httpx.post(f"{srv.url}/v1/sessions/{hung}/step", json={"action": ONE}, timeout=30).json()
            box["took"] = time.monotonic() - t0

        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(0.1)
        # while the env hangs, the server answers everyone else
        assert c.get("/health").status_code == 200
        assert c.post(f"/v1/sessions/{good}/step", json={"action": ONE}).json()["env_error"] is None
        thread.join(10)
    res = box["res"]
    assert box["took"] < 2.5
    assert res["truncated"] is True and res["info"]["error_type"] == "StepTimeout"
    assert res["env_error"] == "StepTimeout: env call exceeded step_timeout=0.4s"


def test_idle_sessions_are_collected_and_busy_ones_kept(start_server: Any) -> None:
    srv = start_server(idle_timeout=0.5, gc_interval=0.05)
    with httpx.Client(base_url=srv.url) as c:
        idle = _reset(c, "vectest:Count")
        busy = _reset(c, "vectest:Count")
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            c.get(f"/v1/sessions/{busy}")  # reads do not count as use ...
            c.post(f"/v1/sessions/{busy}/reset", json={})  # ... calls do
            time.sleep(0.1)
        r = c.post(f"/v1/sessions/{idle}/step", json={"action": ONE})
        assert r.status_code == 404 and "after 0.5 s idle" in r.json()["message"]
        assert c.post(f"/v1/sessions/{busy}/step", json={"action": ONE}).status_code == 200
        metrics = c.get("/metrics").json()
        assert metrics["sessions_collected_idle"] == 1 and metrics["active_sessions"] == 1
    # a RemoteEnv whose session was collected says so at its next step, and its next reset opens a fresh one
    env = RemoteEnv(srv.url, "vectest:Count", seed=5)
    first = env.reset()
    time.sleep(1.0)
    with pytest.raises(RemoteError, match=r"after 0.5 s idle \(HTTP 404 unknown_session\)"):
        env.step(ONE)
    assert env.reset() == first  # same seed and settings, same instance
    assert env.step(ONE).observation == "Total 1."
    env.close()


def test_bearer_token_guards_everything_but_health(start_server: Any) -> None:
    srv = start_server(token="s3cret", agentgym="game:Mastermind")
    assert httpx.get(f"{srv.url}/health").status_code == 200
    for path in ("/v1/envs", "/metrics", "/observation?id=0"):
        r = httpx.get(f"{srv.url}{path}")
        assert r.status_code == 401 and r.json()["error"] == "unauthorized" and "missing" in r.json()["message"]
        assert r.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(
        f"{srv.url}/v1/sessions", json={"env_id": "game:Mastermind"}, headers={"Authorization": "Bearer no"}
    )
    assert wrong.status_code == 401 and "wrong" in wrong.json()["message"]
    assert httpx.post(f"{srv.url}/create").status_code == 401
    anonymous = RemoteEnv(srv.url, "game:Mastermind")
    with pytest.raises(RemoteError, match="401"):
        anonymous.reset(seed=0)
    anonymous.close()
    env = RemoteEnv(srv.url, "game:Mastermind", token="s3cret")
    assert env.reset(seed=0)[0].startswith("I hid a code")
    env.close()


class _DropFirstReply(httpx.HTTPTransport):
    """Delivers the first step request to the server, then loses its reply (as a dropped connection would)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path.endswith("/step") and not self.dropped:
            self.dropped += 1
            response.read()
            raise httpx.ReadError("connection reset by peer (simulated)", request=request)
        return response


def test_client_retries_a_lost_reply_without_stepping_twice(start_server: Any) -> None:
    srv = start_server()
    transport = _DropFirstReply()
    client = RemoteClient(srv.url, transport=transport, backoff=0.01)
    sid = client.create_session("game:Mastermind", seed=3, idempotency_key="k1")["session_id"]
    client.reset(sid, seq=1)
    res = client.step(sid, r"\boxed{1 2 3}", seq=2)
    assert transport.dropped == 1
    assert client.state(sid)["turn"] == 1 and res["info"]["turn"] == 1
    client.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_client_retries_until_the_server_is_up_and_then_gives_up_clearly(start_server: Any) -> None:
    port = _free_port()
    threading.Timer(0.4, lambda: start_server(port=port)).start()  # comes up while the client retries
    with RemoteClient(f"http://127.0.0.1:{port}", retries=8, backoff=0.05) as client:
        assert client.health()["status"] == "ok"
    dead = _free_port()
    with (
        RemoteClient(f"http://127.0.0.1:{dead}", retries=2, backoff=0.01) as client,
        pytest.raises(RemoteConnectionError, match=rf"GET http://127.0.0.1:{dead}/health failed after 3 attempts"),
    ):
        client.health()


RESTART_CLIENT = textwrap.dedent(
    """
    import os, sys
    from gymverse.client import RemoteEnv
    env = RemoteEnv(sys.argv[1], "game:Mastermind", complexity=4, idempotency_key="trainer-7/slot-0")
    env.reset(seed=21)
    for action in sys.argv[2:]:
        print(env.step(action).observation, flush=True)
    os._exit(0)  # dies mid-episode: no close, no goodbye
    """
)


def test_a_restarted_client_takes_its_session_back_mid_episode(start_server: Any) -> None:
    srv = start_server()
    first, rest = [r"\boxed{1 2 3 4}", r"\boxed{2 3 4 5}"], [r"\boxed{6 6 1 1}", r"\boxed{1 1 1 1}"]
    local = gymverse.make("game:Mastermind", complexity=4)
    local.reset(seed=21)
    expected = [local.step(a).observation for a in first + rest]
    out = subprocess.run(
        [sys.executable, "-c", RESTART_CLIENT, srv.url, *first], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.splitlines() == expected[:2]
    assert srv.manager.metrics.sessions_created == 1 and len(srv.manager.leases) == 1  # left open by the crash
    env = RemoteEnv(srv.url, "game:Mastermind", complexity=4, idempotency_key="trainer-7/slot-0")
    assert env.observation() == expected[1]  # the same session, where the dead client left it
    assert env.turn == 2 and not env.done
    assert [env.step(a).observation for a in rest] == expected[2:]
    attached = RemoteEnv(srv.url, "game:Mastermind", session_id=env.session_id)  # or by id
    assert attached.turn == 4 and attached.observation() == expected[3]
    env.close()
    attached.close()  # already closed on the server: still fine
    assert srv.manager.metrics.sessions_created == 1 and len(srv.manager.leases) == 0
