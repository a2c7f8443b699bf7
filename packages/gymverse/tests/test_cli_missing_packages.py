"""A GymVerse package that is not installed: its `gymverse` subcommand and the remote client say, in one line,
what to install (instead of argparse's "invalid choice" or a bare ModuleNotFoundError)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.metadata
import sys
from collections.abc import Sequence
from typing import Any

import gymverse
import pytest
from gymverse.cli import PLUGIN_COMMANDS, main
from gymverse.registry import RegistryError


def _under(module: str, names: Sequence[str]) -> bool:
    """Whether `module` is one of the packages `names` or inside one of them."""
    return any(module == name or module.startswith(name + ".") for name in names)


class _Blocker(importlib.abc.MetaPathFinder):
    """Makes the named packages unimportable, as if they were not installed."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if _under(fullname, self.names):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _block(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Hide `names` (and every loaded module under them) for the rest of the test; monkeypatch restores both."""
    for mod in [m for m in sys.modules if _under(m, names)]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(sys, "meta_path", [_Blocker(names), *sys.meta_path])


def _without_distribution(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """`importlib.metadata.entry_points` as if the distributions providing `modules` were not installed."""
    real = importlib.metadata.entry_points

    def entry_points(*, group: str, **params: Any) -> list[importlib.metadata.EntryPoint]:
        eps = real(group=group, **params)  # every caller selects a group: entry points, not group names
        return [ep for ep in eps if not _under(ep.value.split(":")[0], modules)]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "package"),
    [
        (["evaluate", "--no-fail", "game"], "gymverse-eval"),
        (["synth", "--domain", "Logic", "--n", "2", "--llm", "local"], "gymverse-synth"),
        (["train", "--envs", "demo:EchoTarget", "--steps", "40"], "gymverse-train"),
    ],
)
def test_uninstalled_command_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], package: str
) -> None:
    _without_distribution(monkeypatch, "gymverse.evaluate", "gymverse_synth", "gymverse_train")
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err  # one line
    assert f"pip install {package}" in err
    assert "invalid choice" not in err
    assert f"'{argv[0]}'" in err


def test_help_lists_uninstalled_commands_with_their_package(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_distribution(monkeypatch, "gymverse.evaluate", "gymverse_synth", "gymverse_train")
    code, out, _ = _run(capsys, "--help")
    assert code == 0
    for command, package in PLUGIN_COMMANDS.items():
        assert command in out
        assert f"pip install {package}" in out
    # the installed commands still work
    code, out, _ = _run(capsys, "list", "--family", "game")
    assert code == 0
    assert "game:Mastermind" in out


def test_plugin_whose_package_cannot_be_imported_gets_the_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The distribution's metadata is there but its module is gone (a half-removed install).
    _block(monkeypatch, "gymverse_train")
    code, _, err = _run(capsys, "train", "--steps", "3")
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith("gymverse: ignoring command plugin 'train': ModuleNotFoundError")
    assert lines[-1].startswith("gymverse: 'train' comes with the gymverse-train package")
    assert "pip install gymverse-train" in lines[-1]


def test_installed_commands_are_not_shadowed_by_the_hint(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gymverse_synth")
    code, out, err = _run(capsys, "evaluate", "--help")
    assert code == 0
    assert "--no-diversity" in out
    assert "not installed" not in out + err


def test_remote_env_without_the_server_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "gymverse.client")
    with pytest.raises(RegistryError) as info:
        gymverse.make("remote+http://127.0.0.1:9/game:Mastermind")
    message = str(info.value)
    assert "\n" not in message
    assert "pip install gymverse-server" in message


def test_serve_without_the_server_package_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _block(monkeypatch, "gymverse.server")
    code, out, err = _run(capsys, "serve", "--port", "0")
    assert code == 2
    assert out == ""
    assert "pip install gymverse-server" in err
