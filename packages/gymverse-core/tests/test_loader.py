"""Loading Env classes from files and modules, with errors that name the file and the problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from gymverse.checker import check_env
from gymverse.envs.game.guess_number import GuessTheNumber
from gymverse.loader import EnvLoadError, load_env_class, split_spec

GOOD = """
from gymverse.envs.game.guess_number import GuessTheNumber  # imported: must not count as a candidate


class WideGuess(GuessTheNumber):
    complexity_params = {"upper": (20, 8000), "slack": (6, 0)}
"""

TWO = """
from gymverse.envs.game.guess_number import GuessTheNumber


class First(GuessTheNumber):
    pass


class Second(GuessTheNumber):
    complexity_params = {"upper": (30, 3000), "slack": (5, 0)}
"""


def _write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_single_class_is_found_and_checkable(tmp_path: Path) -> None:
    path = _write(tmp_path, "wide.py", GOOD)
    cls = load_env_class(path)
    assert cls.__name__ == "WideGuess"
    assert issubclass(cls, GuessTheNumber)
    assert cls.complexity_params["upper"] == (20, 8000)
    assert load_env_class(path) is cls  # same file, same content: same module
    report = check_env(path, levels=(1, 10), seeds=(0,))
    assert report.passed, report.summary()
    assert report.target == path


def test_edited_file_is_reloaded(tmp_path: Path) -> None:
    path = _write(tmp_path, "wide.py", GOOD)
    first = load_env_class(path)
    Path(path).write_text(GOOD.replace("8000", "9000"))
    assert load_env_class(path).complexity_params["upper"] == (20, 9000)
    assert first.complexity_params["upper"] == (20, 8000)


def test_two_classes_need_a_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "two.py", TWO)
    with pytest.raises(
        EnvLoadError, match=r"several Env subclasses \(First, Second\); name one as '.*two.py:ClassName'"
    ):
        load_env_class(path)
    assert load_env_class(f"{path}:Second").complexity_params["upper"] == (30, 3000)
    assert load_env_class(f"{path}:First").__name__ == "First"


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.py", "import os\n\nclass X(:\n    pass\n")
    with pytest.raises(EnvLoadError, match=r"broken\.py:3: syntax error"):
        load_env_class(path)


def test_no_env_class(tmp_path: Path) -> None:
    path = _write(tmp_path, "plain.py", "from gymverse.core import Env\n\nclass NotAnEnv:\n    pass\n")
    with pytest.raises(EnvLoadError, match=r"plain\.py: defines no concrete gymverse Env subclass$"):
        load_env_class(path)


def test_abstract_class_is_explained(tmp_path: Path) -> None:
    src = "from gymverse.core import Env\n\nclass Half(Env):\n    def solve(self) -> str:\n        return ''\n"
    path = _write(tmp_path, "half.py", src)
    with pytest.raises(EnvLoadError, match="Half left abstract methods unimplemented"):
        load_env_class(path)
    with pytest.raises(EnvLoadError, match=r"Half is abstract \(does not implement: _reset, _step\)"):
        load_env_class(f"{path}:Half")


def test_import_error_names_file_and_module(tmp_path: Path) -> None:
    path = _write(tmp_path, "needs.py", "import definitely_not_installed_pkg\n")
    with pytest.raises(EnvLoadError, match=r"needs\.py: executing the file failed: ModuleNotFoundError: .*definitely"):
        load_env_class(path)


def test_runtime_error_at_import(tmp_path: Path) -> None:
    path = _write(tmp_path, "boom.py", "raise RuntimeError('config missing')\n")
    with pytest.raises(EnvLoadError, match="RuntimeError: config missing"):
        load_env_class(path)


def test_named_class_problems(tmp_path: Path) -> None:
    path = _write(tmp_path, "wide.py", GOOD + "\nHELPER = 3\n")
    with pytest.raises(EnvLoadError, match=r"no class 'Nope' \(Env subclasses defined there: WideGuess\)"):
        load_env_class(f"{path}:Nope")
    with pytest.raises(EnvLoadError, match="'HELPER' is a int, not a gymverse Env subclass"):
        load_env_class(f"{path}:HELPER")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EnvLoadError, match="no such file"):
        load_env_class(str(tmp_path / "absent.py"))


def test_modules() -> None:
    assert load_env_class("gymverse.envs.game.guess_number") is GuessTheNumber
    assert load_env_class("gymverse.envs.game.guess_number:GuessTheNumber") is GuessTheNumber
    with pytest.raises(EnvLoadError, match=r"cannot import module 'gymverse\.no_such_mod'"):
        load_env_class("gymverse.no_such_mod:Env")
    with pytest.raises(EnvLoadError, match=r"expected 'path/to/file\.py"):
        load_env_class("  ")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("a/b.py", ("a/b.py", None)),
        ("a/b.py:Env2", ("a/b.py", "Env2")),
        ("pkg.mod:Cls", ("pkg.mod", "Cls")),
        ("pkg.mod", ("pkg.mod", None)),
        ("C:env.py", ("C:env.py", None)),
    ],
)
def test_split_spec(spec: str, expected: tuple[str, str | None]) -> None:
    assert split_spec(spec) == expected
