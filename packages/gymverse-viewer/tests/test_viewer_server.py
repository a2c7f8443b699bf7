"""`gymverse view` over real loopback HTTP: the JSON API, errors, the CLI serving and stopping, and --export."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from gymverse.cli import main
from gymverse.viewer import TrajectoryIndex, ViewerServer


def _get(url: str, host: str | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            body = res.read()
            return res.status, json.loads(body) if res.headers["Content-Type"].startswith("application/json") else body
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_json_api_over_loopback(trajectory_run: Path) -> None:
    with ViewerServer(TrajectoryIndex([trajectory_run])).start() as server:
        status, page = _get(server.url)
        assert status == 200 and b'<table id="episodes">' in page
        status, meta = _get(server.url + "api/meta")
        assert status == 200 and meta["episodes"] == 124
        status, res = _get(server.url + "api/episodes?env=game:GuessTheNumber&q=zebra&sort=return&desc=1&limit=5")
        assert status == 200
        assert res["total"] == 2 and len(res["rows"]) == 2
        assert res["summary"]["episodes"] == 2
        status, nosum = _get(server.url + "api/episodes?offset=120&limit=10&summary=0")
        assert status == 200 and len(nosum["rows"]) == 4 and "summary" not in nosum
        status, ep = _get(server.url + f"api/episode/{res['rows'][0]['id']}")
        assert status == 200 and ep["turn_list"][0]["format_error"] is True
        for path, code, word in [
            ("api/episodes?cmin=low", 400, "cmin must be an integer"),
            ("api/episodes?sort=nope", 400, "sort must be one of"),
            ("api/episode/99999", 404, "no episode 99999"),
            ("api/episode/-1", 400, "non-negative integer"),
            ("api/nothing", 404, "no such page"),
        ]:
            status, body = _get(server.url + path)
            assert (status, word in body["error"]) == (code, True), path


def test_requests_for_other_host_names_are_refused(trajectory_run: Path) -> None:
    with ViewerServer(TrajectoryIndex([trajectory_run / "collector.jsonl"])).start() as server:
        port = server.httpd.server_address[1]
        status, body = _get(server.url + "api/meta", host="evil.example:80")
        assert status == 403 and "only answers requests addressed to localhost" in body["error"]
        for host in (f"localhost:{port}", "127.0.0.1", f"[::1]:{port}"):
            assert _get(server.url + "api/meta", host=host)[0] == 200, host


def test_cli_serves_until_interrupted(trajectory_run: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gymverse.cli", "view", str(trajectory_run), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"serving 124 episodes at (http://127\.0\.0\.1:\d+/)", line)
        assert match, line
        status, meta = _get(match.group(1) + "api/meta")
        assert status == 200 and meta["n_problems"] == 1
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "indexed 124 episodes from 3 file(s)" in err
    assert "warning: skipped 1 bad line(s); first: " in err and "mixed.jsonl:2" in err


def test_cli_export_writes_one_self_contained_file(
    trajectory_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "share" / "view.html"
    assert main(["view", str(trajectory_run), "--export", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)  # nothing fetched: no CDN, no assets
    assert "https://" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "</script><script>window.pwned" not in html  # the hostile action cannot close the data element
    data = re.search(r'<script id="gv-data" type="application/json">(.*?)</script>', html, re.S)
    assert data is not None
    embedded = json.loads(data.group(1))
    assert len(embedded["episodes"]) == 124
    assert "window.pwned" in json.dumps(embedded)


def test_cli_usage_errors(tmp_path: Path, trajectory_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path / "nope.jsonl")]) == 2
    assert "gymverse view: error: " in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["view", str(trajectory_run / "collector.jsonl"), "--port", str(port)]) == 2
    assert f"port {port} is in use" in capsys.readouterr().err
