#!/usr/bin/env python3
"""Walk the root README as a newcomer does: both set-up commands, the "Thirty seconds" Python example and every line
of its shell block, as written, from an empty directory; servers are probed over HTTP and in headless Chromium
(screenshots plus DOM assertions), long jobs run bounded.

    python3 .ci/newcomer.py [--ci] [--out DIR]

``--ci`` runs only what is cheap (CI runs the test command and a fresh-venv evaluate itself): the main job, the
tests, the synthesis and the training lines are reported as skipped with the reason. Prints one line per README
line as it goes and a table at the end, writes ``newcomer.json`` and the screenshots into ``--out``; exits 1 if
any line failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
URL_RE = re.compile(r"http://127\.0\.0\.1:\d+/?")


@dataclass
class Outcome:
    """What happened to one README line."""

    line: str
    status: str  # "ok", "failed", "skipped"
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def readme_commands(text: str) -> tuple[list[str], str, list[str]]:
    """(set-up commands, the Thirty-seconds Python block, its shell lines: the quick ones, then the longer runs)."""
    blocks = re.findall(r"```(bash|python)\n(.*?)```", text, re.S)
    section = text.split("## Thirty seconds", 1)[1].split("\n## ", 1)[0]
    thirty = re.findall(r"```(bash|python)\n(.*?)```", section, re.S)
    python = next(body for kind, body in thirty if kind == "python")
    shell = [line for kind, body in thirty if kind == "bash" for line in _lines(body)]
    return _lines(blocks[0][1]), python, shell


def _lines(block: str) -> list[str]:
    """Shell lines with continuations joined and trailing comments dropped."""
    joined = block.replace("\\\n", " ")
    out = []
    for raw in joined.splitlines():
        words = shlex.split(raw, comments=True)
        if words:
            out.append(shlex.join(words))
    return out


class Walk:
    """Runs README lines in a scratch directory against this checkout's project (``UV_PROJECT``)."""

    def __init__(self, out: Path, ci: bool, browser: Any) -> None:
        self.out, self.ci, self.browser = out, ci, browser
        self.cwd = Path(tempfile.mkdtemp(prefix="gymverse-newcomer-"))
        self.env = {**os.environ, "UV_PROJECT": str(REPO), "GYMVERSE_PROGRESS_INTERVAL": "5"}
        self.outcomes: list[Outcome] = []

    def run(self, line: str, check: Callable[[str, Outcome], None] | None = None, *, stdin: str = "",
            timeout: float = 900) -> Outcome:  # fmt: skip
        """Run `line` to completion (bounded by `timeout`); `check` inspects its output."""
        t0 = time.monotonic()
        outcome = Outcome(line, "ok")
        try:
            proc = subprocess.run(shlex.split(line), cwd=self.cwd, env=self.env, input=stdin, text=True,
                                  capture_output=True, timeout=timeout)  # fmt: skip
            output = proc.stdout + proc.stderr
            if proc.returncode != 0:
                outcome.status = "failed"
                outcome.notes.append(f"exit {proc.returncode}: {output.strip()[-600:]}")
            elif check is not None:
                check(output, outcome)
        except subprocess.TimeoutExpired:
            outcome.status = "failed"
            outcome.notes.append(f"still running after {timeout:.0f} s")
        except AssertionError as err:
            outcome.status = "failed"
            outcome.notes.append(f"assertion: {err}")
        return self._done(outcome, t0)

    def serve(self, line: str, probe: Callable[[str, Outcome], None], timeout: float = 120) -> Outcome:
        """Start a server line, wait for its URL, `probe` it, then Ctrl-C it: it must exit 0 within 10 s."""
        t0 = time.monotonic()
        outcome = Outcome(line, "ok")
        proc = self._spawn(line)
        seen = ""
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + timeout
            url = None
            while url is None and time.monotonic() < deadline and proc.poll() is None:
                seen += proc.stdout.readline()
                match = URL_RE.search(seen)
                url = match.group(0).rstrip("/") if match else None
            assert url is not None, f"no URL within {timeout:.0f} s: {seen[-400:]}"
            _wait_http(url + "/", deadline)
            probe(url, outcome)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(10)
            assert code == 0, f"exit {code} after Ctrl-C: {proc.stdout.read()[-600:]}"
        except (AssertionError, subprocess.TimeoutExpired, OSError) as err:
            outcome.status = "failed"
            outcome.notes.append(f"{type(err).__name__}: {err}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return self._done(outcome, t0)

    def bounded(self, line: str, until: str, timeout: float) -> Outcome:
        """Run a long line as written until its output shows `until` (e.g. the first training step), then stop it."""
        t0 = time.monotonic()
        outcome = Outcome(line, "ok")
        proc = self._spawn(line)
        seen = ""
        try:
            assert proc.stdout is not None
            while until not in seen and proc.poll() is None and time.monotonic() - t0 < timeout:
                seen += proc.stdout.readline()
            if until not in seen:
                outcome.status = "failed"
                outcome.notes.append(f"no {until!r} within {timeout:.0f} s: {seen.strip()[-400:]}")
            else:
                outcome.notes.append(f"reached {until!r} after {time.monotonic() - t0:.0f} s, then stopped")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        return self._done(outcome, t0)

    def _spawn(self, line: str) -> subprocess.Popen[str]:
        # no shell in between: Ctrl-C in a terminal reaches uv and gymverse, not a `sh -c` that dies of it
        return subprocess.Popen(shlex.split(line), cwd=self.cwd, env=self.env, text=True, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def skip(self, line: str, why: str) -> Outcome:
        """Record a line not run, with the reason."""
        return self._done(Outcome(line, "skipped", notes=[why]), time.monotonic())

    def _done(self, outcome: Outcome, t0: float) -> Outcome:
        outcome.seconds = round(time.monotonic() - t0, 1)
        self.outcomes.append(outcome)
        notes = f"  ({'; '.join(outcome.notes)[:300]})" if outcome.notes else ""
        print(f"newcomer: {outcome.status:7} {outcome.seconds:6.1f}s  {outcome.line}{notes}", flush=True)
        return outcome

    # ------------------------------------------------------------------------------------------ browser probes
    def page(self, url: str, name: str, ready: str) -> Any:
        """Open `url` headless, wait for `ready` (a JS condition), screenshot it as ``name.png``."""
        page = self.browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.wait_for_function(ready, timeout=30_000)
        page.screenshot(path=str(self.out / f"{name}.png"), full_page=True)
        page.errors = errors
        return page


def _wait_http(url: str, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _get(url: str, accept: str = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def probe_viewer(walk: Walk) -> Callable[[str, Outcome], None]:
    """The viewer lists the episodes with the policy that played each, one success rate per policy."""

    def probe(url: str, outcome: Outcome) -> None:
        page = walk.page(url + "/", "viewer", "document.body.dataset.state === 'ready'")
        rows = page.locator("tr.ep-row").count()
        policies = set(page.eval_on_selector_all("tr.ep-row td.policy", "cs => cs.map(c => c.textContent)"))
        per_policy = page.locator(".policy-success").count()
        assert rows > 0, "the viewer lists no episode"
        assert len(policies) >= 2 and "–" not in policies, f"policy column: {sorted(policies)}"
        assert per_policy == len(page.eval_on_selector_all("#f-policy option", "os => os.slice(1)"))
        assert page.errors == [], page.errors
        outcome.notes.append(f"{rows} rows shown, policies {sorted(policies)}, viewer.png")

    return probe


def probe_server(walk: Walk) -> Callable[[str, Outcome], None]:
    """GET / indexes the served envs (no test fixtures), an env id is a page, /docs needs no CDN."""

    def probe(url: str, outcome: Outcome) -> None:
        status, body = _get(url + "/")
        index = json.loads(body)
        assert status == 200 and "game:Mastermind" in index["envs"], body[:300]
        assert not [e for e in index["envs"] if e.startswith("vectest:")], "test fixtures are served"
        status, body = _get(url + "/game:Mastermind")
        assert status == 200 and json.loads(body)["env"]["id"] == "game:Mastermind", body[:300]
        assert _get(url + "/docs")[0] == 404
        page = walk.page(url + "/", "serve-index", "document.readyState === 'complete'")
        assert page.locator("li a").count() == len(index["envs"])
        page.close()
        outcome.notes.append(f"{len(index['envs'])} envs indexed, serve-index.png")

    return probe


def probe_report(walk: Walk, out_dir: str) -> Callable[[str, Outcome], None]:
    """The evaluation wrote its JSON and an HTML report that renders one row per env."""

    def check(output: str, outcome: Outcome) -> None:
        report = walk.cwd / out_dir / "report.html"
        data = json.loads((walk.cwd / out_dir / "evaluation.json").read_text())
        assert report.is_file(), f"no {report}"
        page = walk.page(report.as_uri(), "report", "document.readyState === 'complete'")
        text = page.inner_text("body")
        envs = [e.get("name") or e.get("id") for e in data.get("envs", [])]
        missing = [e for e in envs if e and e not in text]
        assert not missing, f"report misses {missing}"
        assert page.errors == [], page.errors
        outcome.notes.append(f"{len(envs)} envs in report.html, report.png")

    return check


def walk_readme(walk: Walk) -> None:
    """Every README line in order."""
    setup, python, shell = readme_commands((REPO / "README.md").read_text(encoding="utf-8"))
    for line in setup:
        if "pytest" in line:
            walk.skip(line, "the test command: CI runs it in its own step")
        elif walk.ci:
            walk.skip(line, "the main job takes minutes; CI's fresh venv runs evaluate itself")
        else:
            walk.run(line, lambda out, o: o.notes.append(out.strip().splitlines()[-1][:120]), timeout=1800)
    walk.run(f"uv run python -c {shlex.quote(python)}", lambda out, o: _nonempty(out), timeout=300)
    for line in shell:
        words = shlex.split(line)
        command = words[3] if words[:3] == ["uv", "run", "gymverse"] and len(words) > 3 else ""
        if command == "play":
            walk.run(line, lambda out, o: _contains(out, "SUCCESS in"), stdin=":oracle\n" * 12)
        elif command == "view":
            walk.serve(line, probe_viewer(walk))
        elif command == "serve":
            walk.serve(line, probe_server(walk))
        elif command == "evaluate":
            out_dir = words[words.index("--out") + 1] if "--out" in words else "gymverse-eval"
            walk.run(line, probe_report(walk, out_dir), timeout=900)
        elif command == "train":
            if walk.ci:
                walk.skip(line, "training on CPU takes minutes (README: ~15 s/step); run without --ci")
            else:
                walk.bounded(line, "step 1/", timeout=600)
        elif command == "synth":
            if walk.ci:
                walk.skip(line, "the offline model needs minutes per seed; run without --ci")
            else:
                walk.run(line, None, timeout=1800)
        else:
            walk.run(line, None, timeout=900)


def _nonempty(output: str) -> None:
    assert output.strip(), "printed nothing"


def _contains(output: str, text: str) -> None:
    assert text in output, f"{text!r} not in output: {output.strip()[-300:]}"


def main(argv: list[str] | None = None) -> int:
    """Walk the README; exit 1 if any line failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true", help="only the cheap lines (CI)")
    parser.add_argument("--out", default=None, help="screenshots and newcomer.json (default: a temp dir)")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="gymverse-newcomer-out-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    exe = os.environ.get("GYMVERSE_CHROMIUM") or "chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_which(exe), args=["--no-sandbox", "--disable-gpu"])
        walk = Walk(out, args.ci, browser)
        try:
            walk_readme(walk)
        finally:
            browser.close()
    (out / "newcomer.json").write_text(json.dumps([asdict(o) for o in walk.outcomes], indent=1), encoding="utf-8")
    failed = [o for o in walk.outcomes if o.status == "failed"]
    counts = {s: sum(o.status == s for o in walk.outcomes) for s in ("ok", "failed", "skipped")}
    print(f"newcomer: {counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped; {out}/newcomer.json")
    return 1 if failed else 0


def _which(exe: str) -> str:
    import shutil

    path = shutil.which(exe) or shutil.which("chromium-browser")
    if path is None:
        raise SystemExit(f"newcomer: {exe} not found (apt-get install -y chromium)")
    return path


if __name__ == "__main__":
    sys.exit(main())
