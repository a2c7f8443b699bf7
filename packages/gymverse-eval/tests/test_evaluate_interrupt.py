"""Ctrl-C during ``gymverse evaluate``: it stops, keeps what is done (JSON and report marked partial), exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CORPUS = Path(__file__).parent / "gem_corpus"


def test_ctrl_c_keeps_a_partial_report_and_exits_130(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("number_hunt", "parity_check", "lottery_draw", "clue_court"):  # one hangs: work is left to stop
        (suite / f"{name}.py").write_text((CORPUS / f"{name}.py").read_text())
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "gymverse.evaluate.cli", str(suite), "--out", str(out), "--embedder",
           "hashing", "--workers", "1", "--no-diversity"]  # fmt: skip
    # a progress line per finished env (the default every 10 s outlasts the whole run now)
    env = {**os.environ, "COLUMNS": "200", "GYMVERSE_PROGRESS_INTERVAL": "0"}
    # a terminal's Ctrl-C reaches the whole foreground process group: the sandboxed hosts get it too
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert proc.stderr is not None
    seen = b""
    while b"gem:" not in seen and proc.poll() is None:  # some env finished: there is something to keep
        seen += os.read(proc.stderr.fileno(), 4096)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, _ = proc.communicate(timeout=60)  # a guard against a hang, not a timing assertion
    assert proc.returncode == 130, stdout.decode()[-2000:]
    assert b"interrupted (Ctrl-C)" in stdout
    data = json.loads((out / "evaluation.json").read_text())
    assert data["run"]["partial"] is True and data["summary"]["partial"] is True
    reasons = [r for e in data["envs"] for r in e["correctness"]["reasons"]]
    assert any("not evaluated: the run was interrupted" in r for r in reasons)  # not all envs were done ...
    assert any(e["correctness"]["verdict"] != "error" for e in data["envs"])  # ... but some were, and are kept
    assert 'id="partial"' in (out / "report.html").read_text()
