"""``gymverse serve`` as a user runs it: a real process, a token, a remote env over it, a clean SIGTERM shutdown."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("fastapi")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until_up(proc: subprocess.Popen[str], port: int) -> str:
    """The server's URL once /health answers (fails if the process dies or 30 s pass)."""
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return url
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "server did not come up"
        time.sleep(0.1)


def test_serve_runs_until_sigterm_and_closes_its_sessions() -> None:
    from gymverse.client import RemoteEnv

    port = _free_port()
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
        "game,vectest:Count",
        "--token",
        "t0ken",
        "--log-level",
        "info",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = _wait_until_up(proc, port)
        envs = httpx.get(f"{url}/v1/envs", headers={"Authorization": "Bearer t0ken"}).json()["envs"]
        assert {e["id"] for e in envs} >= {"game:Mastermind", "vectest:Count"}
        assert "vectest:Hang" not in {e["id"] for e in envs}
        env = RemoteEnv(url, "vectest:Count", token="t0ken")
        obs, _ = env.reset(seed=0)
        assert obs.startswith("Reach ") and env.step(r"\boxed{1}").observation == "Total 1."
        assert httpx.get(f"{url}/health").json()["active_sessions"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status says how the process ended
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert "closed 1 open session(s)" in err
    assert f"envs on http://127.0.0.1:{port} (bearer token required;" in err
    with pytest.raises(ConnectionError):  # the server is gone; the client says so after its retries
        env.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--envs", "nope:X"], "'nope:X' is neither a registered id nor a family"),
        (["--envs", "games"], "--envs: 'games' is neither a registered id nor a family; did you mean game"),
        (
            ["--envs", "games:Mastermind"],
            "'games:Mastermind' is neither a registered id nor a family; did you mean game:Mastermind",
        ),
        (["--import", "no_such_module_xyz"], "--import no_such_module_xyz: ModuleNotFoundError"),
        (["--agentgym", "game:Nope"], "--agentgym: 'game:Nope' is not a served env id"),
        (["--step-timeout", "0"], "expected positive seconds, got '0'"),
        (["--port", "70000"], "--port must be in 0..65535"),
    ],
)
def test_serve_usage_errors_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gymverse.cli import main

    assert main(["serve", *args]) == 2
    assert message in capsys.readouterr().err


def test_default_serve_has_an_index_no_test_fixtures_and_a_taken_port_fails_first() -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "gymverse.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = _wait_until_up(proc, port)
        index = httpx.get(f"{url}/").json()
        assert "game:Mastermind" in index["envs"] and not [e for e in index["envs"] if e.startswith("vectest")]
        assert {"method": "POST", "path": "/v1/sessions"}.items() <= index["routes"][1].items()
        page = httpx.get(f"{url}/", headers={"Accept": "text/html"})
        assert page.headers["content-type"].startswith("text/html") and 'href="/game:Mastermind"' in page.text
        env = httpx.get(f"{url}/game:Mastermind").json()
        assert env["env"]["id"] == "game:Mastermind" and f"remote+{url}/game:Mastermind" in env["use"]["python"]
        assert httpx.get(f"{url}/vectest:Hang").status_code == 404
        assert httpx.get(f"{url}/docs").status_code == 404  # its page would load a CDN
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert "already in use" in second.stderr
        assert "startup complete" not in second.stderr and "envs on" not in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_ctrl_c_repeated_through_shutdown_and_exit_still_exits_0() -> None:
    """`uv run` forwards the terminal's Ctrl-C 200 ms after the child got it: a late one must not kill the exit."""
    port = _free_port()
    cmd = [sys.executable, "-m", "gymverse.cli", "serve", "--port", str(port), "--envs", "game:Mastermind"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until_up(proc, port)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)  # every 2 ms until it is gone: one lands in interpreter finalization
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-600:]
    assert "closed 0 open session(s)" in err
