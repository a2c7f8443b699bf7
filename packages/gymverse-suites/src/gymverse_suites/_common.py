"""What every suite wrapper shares: finding a suite's package without importing it, quiet imports, and RNG scopes."""

from __future__ import annotations

import importlib
import importlib.util
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import numpy as np
from gymverse.global_rng import GlobalRngScope

SEED_SPACE = 2**31 - 1


def installed(module: str) -> bool:
    """True when `module` can be imported here (found on the path; nothing is imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def import_suite(module: str, extra: str) -> ModuleType:
    """Import a suite's package, or raise ModuleNotFoundError naming the extra that installs it."""
    with warnings.catch_warnings():
        # Suite dependencies ship code that warns while it compiles or imports (cellpylib's `is` with a literal,
        # pygame's pkg_resources use); those warnings are theirs, not ours, and would fail a -W error test run.
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name is not None and err.name.split(".")[0] != module.split(".")[0]:
                raise
            raise ModuleNotFoundError(
                f"this env needs the package {module!r}: pip install 'gymverse-suites[{extra}]'", name=module
            ) from None


class GlobalRng:
    """Private states of the global ``random``/``numpy.random`` generators for suite code that draws from them.

    Core's GEM adapter owns the swapping; this seeds it per episode so a suite that reseeds or reads the global
    generators gives the same instance for the same seed, and the caller's generators stay untouched.
    """

    def __init__(self, seed: int) -> None:
        self._scope = GlobalRngScope(seed)

    @contextmanager
    def active(self, seed: int | None = None) -> Iterator[None]:
        """Swap the private states in for the block; `seed` reseeds them first (at an episode start)."""
        with self._scope.active(numpy=True):
            if seed is not None:
                random.seed(seed)
                np.random.seed(seed % 2**32)  # noqa: NPY002 - the suite's own code reads the legacy generator
            yield
