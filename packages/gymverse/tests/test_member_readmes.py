"""The runnable examples of the READMEs of the members `gymverse` pulls in (server, viewer, vector, eval) run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2]
BLOCKS = [
    (f"{member}-block{i}", code)
    for member in ("gymverse-server", "gymverse-viewer", "gymverse-vector", "gymverse-eval")
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", (PACKAGES / member / "README.md").read_text(), re.S))
]


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[name for name, _ in BLOCKS])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()  # each example prints what it shows
