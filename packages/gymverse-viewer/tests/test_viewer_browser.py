"""The viewer page in a real headless browser (Debian's chromium driven by Playwright): load, filter, open an
episode, check the DOM and a screenshot; the exported page must list exactly what the server lists."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pytest
from gymverse.viewer import Query, TrajectoryIndex, ViewerServer, export_html


def chromium_path() -> str:
    """The system chromium; under CI its absence is a failure, elsewhere a skip."""
    exe = os.environ.get("GYMVERSE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium before the tests")
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return exe


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    exe = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: CI and our machines run as root, where chromium's own sandbox refuses to start
        b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def index(trajectory_run: Path) -> TrajectoryIndex:
    return TrajectoryIndex([trajectory_run])


def _open(browser: Any, url: str) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(url)
    page.wait_for_function("document.body.dataset.state === 'ready'", timeout=15_000)
    return page


def _after(page: Any, action: Any) -> None:
    """Run `action` and wait until the list has re-rendered."""
    before = page.evaluate("window.gv.renders")
    action()
    page.wait_for_function(f"window.gv.renders > {before} && document.body.dataset.state === 'ready'")


def _shown_ids(page: Any) -> list[int]:
    return [int(x) for x in page.eval_on_selector_all("tr.ep-row", "rows => rows.map(r => r.dataset.id)")]


def _assert_not_blank(png: Path) -> None:
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("L"), dtype=np.float64)
    assert pixels.std() > 20, f"screenshot looks blank (std {pixels.std():.1f})"
    assert len(np.unique(pixels)) > 50
    assert (pixels < 128).mean() > 0.01  # text and charts, not one flat colour


def test_filter_open_episode_and_screenshot(browser: Any, index: TrajectoryIndex, tmp_path: Path) -> None:
    with ViewerServer(index).start() as server:
        page = _open(browser, server.url)
        assert page.locator("tr.ep-row").count() == 100
        assert page.text_content("#range") == "1–100 of 124"
        assert "mixed.jsonl:2: skipped" in page.text_content("#problems")
        assert page.locator("#chart-returns svg rect").count() == 30
        assert page.locator("#chart-steps svg polyline").count() == 3  # one line per sampled env with a step
        assert page.locator("#chart-success svg polyline").count() == len(index.env_names)

        _after(page, lambda: page.select_option("#f-env", "game:GuessTheNumber"))
        want_env = [r["id"] for r in index.query(Query(envs=("game:GuessTheNumber",)), 0, 100)["rows"]]
        assert _shown_ids(page) == want_env
        _after(page, lambda: page.fill("#f-text", "ZEBRA"))
        want = [r["id"] for r in index.query(Query(envs=("game:GuessTheNumber",), text="zebra"), 0, 100)["rows"]]
        assert len(want) == 2
        assert _shown_ids(page) == want
        assert "f-text" not in page.url and "q=ZEBRA" in page.url  # the filter lives in the shareable URL

        page.click(f"tr.ep-row[data-id='{want[0]}']")
        page.wait_for_selector("#detail:not([hidden]) .turn")
        record = index.record(want[0])
        assert page.locator("#detail .turn").count() == len(record["turns"])
        assert page.text_content("#detail-turns") == str(len(record["turns"]))
        bad = page.locator("#detail .turn.format-error")
        assert bad.count() == 1
        assert bad.get_attribute("data-turn") == "1"
        assert bad.locator(".format-error-badge").text_content() == "format error"
        assert "boxed" in bad.locator(".error-message").text_content()
        assert page.locator("#detail .turn[data-turn='2'] mark.move").text_content() == "1"
        assert page.locator("#detail .turn[data-turn='1'] mark.move").count() == 0
        shot = tmp_path / "viewer.png"
        page.screenshot(path=str(shot))
        _assert_not_blank(shot)

        page.keyboard.press("Escape")
        assert page.locator("#detail").is_hidden()
        _after(page, lambda: page.click("#f-reset"))
        _after(page, lambda: page.click("th[data-sort='return']"))
        _after(page, lambda: page.click("th[data-sort='return']"))
        assert _shown_ids(page)[0] == int(np.lexsort((np.arange(len(index)), -index.ret))[0])
        _after(page, lambda: page.click("#next"))
        assert page.text_content("#range") == "101–124 of 124"
        assert page.errors == []


def test_hostile_text_stays_text(browser: Any, index: TrajectoryIndex) -> None:
    with ViewerServer(index).start() as server:
        page = _open(browser, server.url)
        _after(page, lambda: page.fill("#f-text", "window.pwned"))
        page.click("tr.ep-row")
        page.wait_for_selector("#detail:not([hidden]) .turn")
        assert "<script>window.pwned=1</script>" in page.text_content("#detail .turn pre.action")
        assert page.evaluate("window.pwned") is None
        assert page.locator("#detail img").count() == 0


def test_exported_page_lists_what_the_server_lists(browser: Any, index: TrajectoryIndex, tmp_path: Path) -> None:
    out = export_html(index, tmp_path / "view.html")
    cases = [
        ({}, Query()),
        (
            {"env": "game:Mastermind", "sort": "return", "desc": "1"},
            Query(envs=("game:Mastermind",), sort="return", descending=True),
        ),
        ({"success": "0", "cmin": "2", "sort": "turns"}, Query(success=False, cmin=2, sort="turns")),
        ({"q": "is too", "format_error": "1"}, Query(text="is too", format_error=True)),
        ({"error": "1"}, Query(error=True)),
    ]
    for params, query in cases:
        page = _open(browser, out.as_uri() + "#" + urlencode(params))
        want = index.query(query, 0, 100)
        assert _shown_ids(page) == [r["id"] for r in want["rows"]], params
        summary = page.evaluate("document.querySelector('#stats').textContent")
        assert f"{want['summary']['episodes']} episodes" in summary
        page.close()
    page = _open(browser, out.as_uri() + "#env=broken%3ACrashes")
    page.click("tr.ep-row")
    page.wait_for_selector("#detail:not([hidden]) .episode-error")
    assert "simulated env crash" in page.text_content("#detail .episode-error")
    assert page.errors == []


def _policy_run(tmp_path: Path) -> Path:
    """What `gymverse evaluate` records: each (env, level, seed) played by several policies."""
    from gymverse.trajectory import Trajectory, Turn, write_jsonl

    trajs = []
    for policy, wins in (("oracle", True), ("random", False), ("noisy:0.3", True)):
        for seed in range(4):
            turn = Turn(f"guess {seed}", rf"\boxed{{{seed}}}", 1.0 if wins else 0.0, {})
            trajs.append(Trajectory("game:Mastermind", seed, 3, [turn], success=wins, metrics={"policy": policy}))
    path = tmp_path / "evaluate.jsonl"
    write_jsonl(trajs, path)
    return path


def test_policy_column_filter_headline_and_detail(browser: Any, tmp_path: Path) -> None:
    index = TrajectoryIndex([_policy_run(tmp_path)])
    assert index.meta()["policies"] == ["noisy:0.3", "oracle", "random"]
    assert index.query(Query(policies=("random",)), 0, 100)["summary"]["success_rate"] == 0.0
    with ViewerServer(index).start() as server:
        page = _open(browser, server.url)
        policies = page.eval_on_selector_all("tr.ep-row td.policy", "cells => cells.map(c => c.textContent)")
        assert policies == ["oracle"] * 4 + ["random"] * 4 + ["noisy:0.3"] * 4
        headline = page.eval_on_selector_all(".policy-success", "ps => ps.map(p => p.textContent)")
        assert headline == ["success noisy:0.3 100.0% (4)", "success oracle 100.0% (4)", "success random 0.0% (4)"]
        _after(page, lambda: page.select_option("#f-policy", "random"))
        assert _shown_ids(page) == [4, 5, 6, 7]
        assert "policy=random" in page.url
        page.click("tr.ep-row[data-id='5']")
        page.wait_for_selector("#detail:not([hidden]) #detail-policy")
        assert page.text_content("#detail-policy") == "policy random"
        assert page.errors == []
    out = export_html(index, tmp_path / "view.html")
    page = _open(browser, out.as_uri() + "#" + urlencode({"policy": "oracle", "sort": "policy"}))
    assert _shown_ids(page) == [r["id"] for r in index.query(Query(policies=("oracle",)), 0, 100)["rows"]]
    assert page.errors == []
