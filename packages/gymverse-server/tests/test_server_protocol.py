"""`gymverse serve` protocol: every endpoint over a real uvicorn server on loopback, and every error status."""

from __future__ import annotations

from typing import Any

import gymverse
import httpx
import pytest

MASTERMIND = "game:Mastermind"


def _open(c: httpx.Client, env_id: str = MASTERMIND, **body: Any) -> str:
    r = c.post("/v1/sessions", json={"env_id": env_id, **body})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


def test_health_and_env_listing(start_server: Any) -> None:
    srv = start_server(envs=("game:*", "vectest:Count"))
    with httpx.Client(base_url=srv.url) as c:
        assert c.get("/health").json() == {"status": "ok", "active_sessions": 0}
        envs = {d["id"]: d for d in c.get("/v1/envs").json()["envs"]}
    assert MASTERMIND in envs and "vectest:Count" in envs
    assert "vectest:Hang" not in envs and "logic:LatinSquare" not in envs  # not served
    md = envs[MASTERMIND]
    assert md["metadata"]["family"] == "game" and md["metadata"]["max_turns"] == 10
    assert md["complexity_params"]["1"]["pegs"] == 3 and md["complexity_params"]["10"]["pegs"] == 5


def test_session_round_trip_over_every_endpoint(start_server: Any) -> None:
    srv = start_server()
    local = gymverse.make(MASTERMIND, complexity=3)
    obs0, _ = local.reset(seed=11)
    guesses = [r"\boxed{1 2 3 4}", "no box here", r"\boxed{4 4 2 2}"]
    expected = [local.step(g) for g in guesses]
    with httpx.Client(base_url=srv.url) as c:
        created = c.post("/v1/sessions", json={"env_id": MASTERMIND, "seed": 11, "complexity": 3})
        assert created.status_code == 201
        sid = created.json()["session_id"]
        assert len(sid) >= 20  # unguessable, not a counter
        assert created.json()["env"]["metadata"]["name"] == "Mastermind"
        reset = c.post(f"/v1/sessions/{sid}/reset", json={}).json()
        assert reset["observation"] == obs0 and reset["info"]["complexity"] == 3 and reset["env_error"] is None
        for guess, exp in zip(guesses, expected):
            res = c.post(f"/v1/sessions/{sid}/step", json={"action": guess}).json()
            assert (res["observation"], res["reward"], res["terminated"], res["truncated"]) == tuple(exp[:4])
            assert res["info"] == exp.info
        assert c.get(f"/v1/sessions/{sid}/observation").json() == {
            "observation": expected[-1].observation,
            "ended": False,
            "turn": 3,
        }
        state = c.get(f"/v1/sessions/{sid}").json()
        assert state["turn"] == 3 and state["episode"] == 1 and state["ended"] is False and state["seq"] == 4
        assert state["episode_return"] == pytest.approx(sum(e.reward for e in expected))
        # complexity: recorded now, in effect at the next reset
        assert c.post(f"/v1/sessions/{sid}/complexity", json={"level": 7}).json()["pending_complexity"] == 7
        assert c.get(f"/v1/sessions/{sid}").json()["complexity"] == 3
        again = c.post(f"/v1/sessions/{sid}/reset", json={"seed": 2}).json()
        assert again["info"]["complexity"] == 7 and again["info"]["pegs"] == 5
        # batch step: good and bad items side by side
        other = _open(c, seed=4)
        c.post(f"/v1/sessions/{other}/reset", json={"complexity": 1})
        calls = [
            {"session_id": sid, "action": r"\boxed{1 1 1 1 1}"},
            {"session_id": "no-such-session", "action": "x"},
            {"op": "step", "session_id": other, "action": r"\boxed{1 2 3}"},
            {"op": "reset", "session_id": other, "seed": 4, "complexity": 2},
        ]
        batch = c.post("/v1/batch", json={"calls": calls}).json()["results"]
        assert [(r["op"], r["ok"]) for r in batch] == [("step", True), ("step", False), ("step", True), ("reset", True)]
        assert batch[0]["session_id"] == sid and batch[0]["info"]["turn"] == 1
        assert batch[1]["status"] == 404 and batch[1]["error"] == "unknown_session"
        assert batch[3]["info"]["complexity"] == 2 and batch[3]["info"]["colors"] == 5
        assert batch[2]["observation"].startswith("1 2 3:")
        metrics = c.get("/metrics").json()
        assert metrics["active_sessions"] == 2 and metrics["steps_total"] == 5 and metrics["resets_total"] == 4
        assert metrics["http_errors"] == {"404": 1}
        # close
        assert c.delete(f"/v1/sessions/{sid}").json() == {"session_id": sid, "closed": True}
        gone = c.post(f"/v1/sessions/{sid}/step", json={"action": "x"})
        assert gone.status_code == 404 and "was closed" in gone.json()["message"]
        c.delete(f"/v1/sessions/{other}")
        assert c.get("/health").json()["active_sessions"] == 0


def test_create_is_idempotent_and_retried_calls_run_once(start_server: Any) -> None:
    srv = start_server()
    with httpx.Client(base_url=srv.url) as c:
        body = {"env_id": MASTERMIND, "seed": 1, "idempotency_key": "worker-3/slot-7"}
        first, second = c.post("/v1/sessions", json=body), c.post("/v1/sessions", json=body)
        assert (first.status_code, second.status_code) == (201, 200)
        assert first.json()["session_id"] == second.json()["session_id"] and second.json()["created"] is False
        sid = first.json()["session_id"]
        c.post(f"/v1/sessions/{sid}/reset", json={"seq": 1})
        step = {"action": r"\boxed{1 2 3}", "seq": 2}
        a, b = c.post(f"/v1/sessions/{sid}/step", json=step), c.post(f"/v1/sessions/{sid}/step", json=step)
        assert a.json() == b.json()  # the retry is answered from the cache ...
        assert c.get(f"/v1/sessions/{sid}").json()["turn"] == 1  # ... and the env stepped once
        skip = c.post(f"/v1/sessions/{sid}/step", json={"action": "x", "seq": 9})
        assert skip.status_code == 409 and skip.json()["error"] == "seq_mismatch"


def _bad_requests(sid: str, ended: str, fresh: str) -> list[tuple[str, str, Any, int, str, str]]:
    """(method, path, json-or-raw-bytes, status, error kind, message fragment)."""
    big = "x" * (64 * 1024 + 1)
    return [
        ("POST", "/v1/sessions", b"{not json", 400, "bad_request", "not valid JSON"),
        ("POST", "/v1/sessions", [1, 2], 400, "bad_request", "must be a JSON object"),
        ("POST", "/v1/sessions", {"seed": 1}, 400, "bad_request", "'env_id'"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "seed": -1}, 400, "bad_request", "'seed'"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "kwargs": [1]}, 400, "bad_request", "'kwargs'"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "kwargs": {"colour": 3}}, 400, "bad_kwargs", "colour"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "kwargs": {"seed": 3}}, 400, "bad_kwargs", "seed"),
        ("POST", f"/v1/sessions/{sid}/step", {"action": 42}, 400, "bad_request", "'action' must be a string"),
        ("POST", f"/v1/sessions/{sid}/step", {}, 400, "bad_request", "'action'"),
        ("POST", "/v1/batch", {"calls": "all"}, 400, "bad_request", "'calls'"),
        ("POST", "/v1/batch", {"calls": [{"op": "jump", "session_id": sid}]}, 400, "bad_request", "'jump'"),
        ("POST", "/v1/sessions", {"env_id": "game:Mastermnd"}, 404, "unknown_env", "did you mean game:Mastermind"),
        ("POST", "/v1/sessions/nope/reset", {}, 404, "unknown_session", "nope"),
        ("GET", "/v1/sessions/nope", None, 404, "unknown_session", "nope"),
        ("DELETE", "/v1/sessions/nope", None, 404, "unknown_session", "nope"),
        ("POST", f"/v1/sessions/{fresh}/step", {"action": "x"}, 409, "episode_over", "has not started"),
        ("POST", f"/v1/sessions/{ended}/step", {"action": "x"}, 409, "episode_over", "is over"),
        ("POST", f"/v1/sessions/{sid}/step", {"action": big}, 413, "action_too_large", "65537 bytes"),
        ("POST", f"/v1/sessions/{sid}/step", {"action": "é" * 40000}, 413, "action_too_large", "80000 bytes"),
        ("POST", "/v1/batch", {"calls": [{"session_id": sid, "action": "x"}] * 5000}, 413, "batch_too_large", "4096"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "complexity": 0}, 422, "bad_complexity", "1..10, got 0"),
        ("POST", "/v1/sessions", {"env_id": MASTERMIND, "complexity": "high"}, 422, "bad_complexity", "'high'"),
        ("POST", f"/v1/sessions/{sid}/reset", {"complexity": 11}, 422, "bad_complexity", "got 11"),
        ("POST", f"/v1/sessions/{sid}/complexity", {}, 422, "bad_complexity", "'level'"),
        ("POST", f"/v1/sessions/{sid}/complexity", {"level": 2.5}, 422, "bad_complexity", "2.5"),
    ]


def test_every_error_is_a_real_http_status_with_a_json_body(start_server: Any) -> None:
    srv = start_server()
    with httpx.Client(base_url=srv.url) as c:
        sid, ended, fresh = _open(c), _open(c, "vectest:Count", seed=0), _open(c)
        c.post(f"/v1/sessions/{sid}/reset", json={})
        c.post(f"/v1/sessions/{ended}/reset", json={})
        while not c.post(f"/v1/sessions/{ended}/step", json={"action": r"\boxed{3}"}).json()["terminated"]:
            pass
        for method, path, payload, status, kind, fragment in _bad_requests(sid, ended, fresh):
            if isinstance(payload, bytes):
                r = c.request(method, path, content=payload, headers={"content-type": "application/json"})
            else:
                r = c.request(method, path, json=payload)
            assert r.status_code == status, (method, path, r.text)
            body = r.json()
            assert body["status"] == status and body["error"] == kind, (path, body)
            assert fragment in body["message"], (path, body["message"])
        # nothing above hurt the session
        assert c.post(f"/v1/sessions/{sid}/step", json={"action": r"\boxed{1 1 1}"}).status_code == 200


def test_body_limit_session_limit_and_shutdown(start_server: Any) -> None:
    srv = start_server(max_sessions=2, max_body_bytes=1000)
    with httpx.Client(base_url=srv.url) as c:
        # what a web page could send without a CORS preflight: refused before the body is read
        plain = c.post("/v1/sessions", content=b'{"env_id": "game:Mastermind"}', headers={"content-type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["error"] == "unsupported_media_type"
        # a name re-pointed at 127.0.0.1 (DNS rebinding) is not a loopback Host
        rebound = c.get("/health", headers={"host": f"attacker.example:{srv.port}"})
        assert rebound.status_code == 403 and rebound.json()["error"] == "forbidden_host"
        assert c.get("/health", headers={"host": f"localhost:{srv.port}"}).status_code == 200
        too_big = c.post("/v1/sessions", content=b" " * 2000, headers={"content-type": "application/json"})
        assert too_big.status_code == 413 and too_big.json()["error"] == "body_too_large"
        a, _ = _open(c), _open(c)
        over = c.post("/v1/sessions", json={"env_id": MASTERMIND})
        assert over.status_code == 429 and over.json()["error"] == "too_many_sessions"
        assert over.headers["retry-after"] == "1" and "limit of 2 sessions" in over.json()["message"]
        c.delete(f"/v1/sessions/{a}")
        assert c.post("/v1/sessions", json={"env_id": MASTERMIND}).status_code == 201  # a freed slot is reusable
        srv.drain()
        down = c.post("/v1/sessions", json={"env_id": MASTERMIND})
        assert down.status_code == 503 and down.json()["error"] == "shutting_down"
        health = c.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "shutting_down"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"envs": ("games:Mastermind",)}, r"envs: 'games:Mastermind' is neither .*; did you mean game:Mastermind[,?]"),
        ({"envs": ("games", "logic")}, r"envs: 'games' is neither a registered id nor a family; did you mean game[,?]"),
        ({"agentgym": "games:Mastermind"}, r"agentgym: 'games:Mastermind' is not a served env id; did you mean game:"),
        ({"envs": ("logic",), "agentgym": MASTERMIND}, r"agentgym: 'game:Mastermind' is not a served env id"),
    ],
)
def test_a_config_naming_no_registered_env_fails_before_serving(config: dict[str, Any], message: str) -> None:
    pytest.importorskip("fastapi")
    from gymverse.server import ServerConfig, create_app

    with pytest.raises(ValueError, match=message):
        create_app(ServerConfig(**config))  # earlier releases' ids (games:, tooluse:) are no aliases any more
