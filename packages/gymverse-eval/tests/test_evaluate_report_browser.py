"""report.html as people see it: rendered by headless Chromium (Debian's ``chromium``) with a screenshot.

Checks the page renders, logs no console errors, shows the one-sentence explanations, renders counts and lists
as text (no Python reprs), shows one wall time, gives a failed env its reason instead of an empty plot, and that
the diversity map's labels never overlap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gymverse.evaluate import (
    CorrectnessConfig,
    DifficultyConfig,
    EvaluationConfig,
    EvaluationReport,
    HashingEmbedder,
    evaluate_suite,
    load_suite,
)
from gymverse.evaluate.report import EXPLAIN, FLAGS, write_report
from gymverse.evaluate.report_svg import CHAR_W, LABEL_H, diversity_map
from gymverse.evaluate.schema import DiversityResult

CORPUS = Path(__file__).parent / "gem_corpus"
CHROMIUM = os.environ.get("GYMVERSE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\]\s*(.*)")


def _chromium(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("needs Debian's chromium package (apt-get install chromium); CI installs it")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": "/tmp"})


def console_messages(stderr: str) -> list[str]:
    """Messages the page logged to its console (errors, uncaught exceptions, failed loads)."""
    return [m.group(1) for m in map(CONSOLE.search, stderr.splitlines()) if m]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvaluationReport, Path]:
    files = [CORPUS / f"{n}.py" for n in ("clue_court", "clue_tribunal", "balance_scale", "py312_fstring")]
    cfg = EvaluationConfig(
        executor="inline",
        embedder=HashingEmbedder(),
        difficulty=DifficultyConfig(levels=(1, 5, 10), seeds=tuple(range(6))),
        correctness=CorrectnessConfig(checker_levels=(1,), checker_seeds=(0,), reset_seeds=8, constant_seeds=6),
    )
    rep = evaluate_suite(load_suite(",".join(map(str, files)) + ",game:GuessTheNumber"), cfg)
    _, html_path = write_report(rep, tmp_path_factory.mktemp("report"))
    return rep, html_path


def test_chromium_detects_console_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); missingFn();</script></body></html>')
    msgs = console_messages(_chromium("--dump-dom", url=bad.as_uri()).stderr)
    assert any("boom" in m for m in msgs) and any("missingFn" in m for m in msgs)


def test_report_renders_without_console_errors_and_explains_what_it_shows(
    report: tuple[EvaluationReport, Path], tmp_path: Path
) -> None:
    rep, html_path = report
    dom = _chromium("--dump-dom", "--virtual-time-budget=2000", url=html_path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    assert "GymVerse evaluation" in text
    for key in ("verdict", "slope", "spearman", "bucket", "Vendi score", "ast_ngram_distance", "verb_jaccard_distance"):
        assert EXPLAIN[key].split(";")[0][:60] in text.replace("&amp;", "&"), key
    for flag in {f for e in rep.envs for f in e.flags}:
        assert FLAGS[flag][:50] in text, flag
    assert "{'" not in text and "['" not in text  # counts and lists as text, not Python reprs
    assert "Verdicts: " in text and re.search(r"Verdicts: \d+ \w+", text)
    assert text.count("wall time") == 1
    shot = tmp_path / "report.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1280,2400", url=html_path.as_uri())
    assert res.returncode == 0 and shot.stat().st_size > 20_000, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failed_env_gets_its_reason_and_no_empty_plot(report: tuple[EvaluationReport, Path]) -> None:
    rep, html_path = report
    page = html_path.read_text()
    failed = rep.env("gem:py312_fstring")
    assert failed.correctness.verdict == "error"
    row = next(r for r in page.split("<tr>") if "gem:py312_fstring" in r and "not measured" in r)
    assert "needs Python &gt;= 3.12" in row
    assert "<svg" not in row
    assert page.count('class="spark"') == sum(1 for e in rep.envs if any(pd.levels for pd in e.difficulty.values()))


def test_map_labels_never_overlap_even_when_points_crowd() -> None:
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(200, 2))
    pts = [
        {"name": f"gem:env_{i:03d}", "domain": ["game", "logic"][i % 2], "x": x, "y": y} for i, (x, y) in enumerate(xy)
    ]
    svg = diversity_map(DiversityResult(embedder="e", n=len(pts), map=pts))
    boxes = []
    for x, y, label in re.findall(r'<text x="([\d.-]+)" y="([\d.-]+)">(env_\d+)</text>', svg):
        x0, y0 = float(x), float(y) - LABEL_H + 2
        boxes.append((x0, y0, x0 + CHAR_W * len(label), float(y) + 2))
    assert 0 < len(boxes) < len(pts)  # crowded: some names only as hover titles
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    assert svg.count("<title>") == len(pts)
