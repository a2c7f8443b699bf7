"""The ``gymverse.envs`` entry point (importing this module registers): the suites whose packages are installed.

`gymverse list` therefore shows exactly the installed suites, and loading the registry stays cheap: a suite's
package is imported only when one of its envs is built.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from gymverse_suites._common import installed


class Suite(NamedTuple):
    """A wrapped suite: its env family, the module that needs to be importable, the extra and the wrapper."""

    family: str
    package_module: str
    extra: str
    wrapper: str


SUITES: tuple[Suite, ...] = (
    Suite("gem-game", "gem", "gem", "gymverse_suites.gem_games"),
    Suite("babyai", "minigrid", "babyai", "gymverse_suites.babyai"),
    Suite("textcraft", "textcraft", "textcraft", "gymverse_suites.textcraft"),
    Suite("textworld", "textworld", "textworld", "gymverse_suites.textworld"),
    Suite("sciworld", "scienceworld", "sciworld", "gymverse_suites.sciworld"),
    Suite("rg", "reasoning_gym", "rg", "gymverse_suites.rg"),
)


def installed_suites() -> list[Suite]:
    """The suites whose package is importable here."""
    return [s for s in SUITES if installed(s.package_module)]


def register_installed() -> None:
    """Register every installed suite's envs, and the ``agentgym+http://`` id scheme."""
    for suite in installed_suites():
        importlib.import_module(suite.wrapper).register_envs()
    from gymverse_suites import agentgym

    agentgym.register_scheme_hook()


register_installed()  # once per process: the registry imports this module through the entry point
