"""Core's wheel needs numpy and array-api-compat only (issue 36): what it declares, and that it runs without rich."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from gymverse.progress import JobProgress, PlainConsole
from rich.console import Console

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# A fresh interpreter in which rich cannot be imported (``sys.modules["rich"] = None``), as in a lab's environment
# with `pip install gymverse-core` alone: every core module imports, and progress comes out as plain lines.
WITHOUT_RICH = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    sys.modules["rich"] = None
    import gymverse
    core = [p for p in gymverse.__path__ if "gymverse-core" in p]
    names = [m.name for m in pkgutil.walk_packages(core, "gymverse.")]
    for name in names:
        importlib.import_module(name)
    print("imported", len(names), "rich loaded:", any(m.startswith("rich.") for m in sys.modules))
    from gymverse.progress import JobProgress
    with JobProgress("job", 3, interval=0) as progress:
        progress.update(advance=3, description="working")
    print("live:", progress.live)
    """
)


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements}  # type: ignore[union-attr]


def test_core_requires_numpy_and_array_api_compat_only() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert _names(project["dependencies"]) == {"numpy", "array-api-compat"}
    assert _names(project["optional-dependencies"]["rich"]) == {"rich"}  # the live bar is an extra


def test_core_imports_and_prints_progress_lines_without_rich() -> None:
    proc = subprocess.run([sys.executable, "-c", WITHOUT_RICH], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    count = int(out[0].split()[1])
    assert count >= 40 and out[0].endswith("rich loaded: False") and out[-1] == "live: False"
    # stderr is a pipe here, not a terminal: the plain lines are what a log gets
    lines = proc.stderr.splitlines()
    assert lines[0] == "job: started (3 to do)"
    assert "job: 3/3 (100%) 0s working" in lines and lines[-1] == "job: 3/3 (100%) 0s done"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_rich_s_on_a_rich_terminal_and_plain_lines_elsewhere() -> None:
    rich_tty = Console(file=_Tty(), force_terminal=True)
    assert JobProgress("job", 2, console=rich_tty).live
    assert not JobProgress("job", 2, console=rich_tty, enabled=False).live
    stream = _Tty()
    plain = PlainConsole(stream)
    assert plain.is_terminal and not PlainConsole(io.StringIO()).is_terminal
    with JobProgress("job", 2, console=plain, interval=3600) as progress:  # a terminal, but not rich's console
        assert not progress.live
        progress.update(advance=2)
    assert stream.getvalue().splitlines() == ["job: started (2 to do)", "job: 2/2 (100%) 0s done"]
