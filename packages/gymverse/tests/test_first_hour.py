"""A new user's first hour: a portable install, logs that show progress, output that says things once and right."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from gymverse.cli import main
from gymverse.envs.game.mastermind import Mastermind
from gymverse.progress import JobProgress
from gymverse.text import plural
from rich.console import Console

REPO = Path(__file__).resolve().parents[3]


def _portability_check() -> ModuleType:
    path = REPO / ".ci" / "check_portable.py"
    if not path.is_file():
        pytest.fail(f"{path} is missing: CI's portability check must ship with the repository")
    spec = importlib.util.spec_from_file_location("check_portable", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_lock_or_pyproject_names_a_machine_local_path() -> None:
    assert _portability_check().problems(REPO) == []


def test_the_portability_check_catches_a_local_wheel_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.uv]\nfind-links = ["/opt/wheels"]\n'
        '[tool.uv.extra-build-dependencies]\nflash-attn = ["torch==2.13.0+cpu"]\n'
    )
    (tmp_path / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "torch"\nversion = "2.13.0+cpu"\n'
        'source = { registry = "/opt/wheels" }\n'
        'wheels = [{ path = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" }]\n\n'
        '[[package]]\nname = "ok"\nversion = "1.0"\nsource = { registry = "https://pypi.org/simple" }\n\n'
        '[[package]]\nname = "member"\nversion = "0.1.0"\nsource = { editable = "packages/member" }\n\n'
        '[[package]]\nname = "outside"\nversion = "0.1.0"\nsource = { directory = "../../elsewhere" }\n'
    )
    found = "\n".join(_portability_check().problems(tmp_path))
    assert "find-links names the machine-local '/opt/wheels'" in found
    assert "torch==2.13.0+cpu" in found and "machine-local registry '/opt/wheels'" in found
    assert "machine-local file '/opt/wheels/torch" in found
    assert "outside==0.1.0 comes from a machine-local directory" in found
    assert "ok==" not in found and "member==" not in found
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "check_portable.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "machine-local source(s)" in done.stdout


def test_check_all_prints_progress_lines_in_a_log(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GYMVERSE_PROGRESS_INTERVAL", "0")
    assert main(["check", "game:GuessTheNumber", "--levels", "1", "--seeds", "0"]) == 0
    err = capsys.readouterr().err.splitlines()
    progress = [line for line in err if line.startswith("check: ")]
    assert progress[0].startswith("check: started (") and progress[0].endswith(" to do)")  # not "0/N 0s started"
    assert any("checking game:GuessTheNumber" in line for line in progress)
    assert progress[-1].endswith("done") and "(100%)" in progress[-1]


def test_progress_lines_are_spaced_out_by_the_interval() -> None:
    lines: list[str] = []
    console = Console(file=_Sink(lines), force_terminal=False, width=200)
    with JobProgress("job", 1000, console=console, interval=3600) as progress:
        for _ in range(1000):
            progress.update(advance=1, description="working")
    assert len(lines) == 2  # the start and the end, not one line per unit
    assert lines[-1].startswith("job: 1000/1000 (100%)")


class _Sink(io.StringIO):
    """A console file that keeps the non-blank lines written to it."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def write(self, text: str) -> int:
        self.lines += [t for t in text.splitlines() if t.strip()]
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_mastermind_states_its_turn_budget_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--family", "game"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "game:Mastermind" in line)
    cells = [c.strip() for c in row.split("│")]
    assert "10→6" in cells  # the per-level budget, in the max_turns column
    assert "max_turns" not in row  # and not again among the complexity params
    table = Mastermind.complexity_spec().table()
    budgets = [table[level]["max_turns"] for level in range(1, 11)]
    assert Mastermind.metadata.max_turns == max(budgets)


def test_counts_read_as_english() -> None:
    assert plural(1, "env") == "1 env"
    assert plural(2, "turn") == "2 turns"
    assert plural(0, "guess", "guesses") == "0 guesses"
    env = Mastermind(complexity=1)
    obs, _ = env.reset(seed=0)
    assert "guesses" in obs


@pytest.mark.parametrize(("package", "module"), [("adapter-verl", "verl"), ("adapter-openrlhf", "openrlhf")])
def test_adapter_tests_say_why_they_do_not_run_here(package: str, module: str) -> None:
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here: the adapter's tests run in this environment")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"packages/{package}", "-p", "no:cacheprovider", "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 5  # no tests collected ...
    assert f"{module} is not installed in this environment" in done.stdout  # ... and the reason is printed
    assert ".venv-" in done.stdout
