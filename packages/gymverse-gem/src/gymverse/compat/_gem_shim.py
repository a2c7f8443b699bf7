"""A minimal stand-in for the parts of GEM (pypi ``gem-llm``) that GEM-style env files import.

It is served as ``gem``, ``gem.core``, ``gem.utils``, ``gem.utils.constants``, ``gem.utils.seeding`` and
``gem.utils.parsing`` only while GymVerse imports or runs such a file (see `gem_modules`), and only when the real
package is not installed; ``sys.modules`` is restored afterwards. Names and values follow GEM's public API:
``gem.core.Env`` (abstract ``reset(seed=None)`` that seeds ``random`` and ``numpy.random``, abstract ``step``,
``sample_random_action``, ``unwrapped``, ``spawn``), ``gem.core.EnvWrapper``, ``TERMINAL_STATE`` and
``LanguageGameReward``. Anything else (``gem.envs``, ``gem.tools``, ``BASE_IMPORTS``...) needs the real package.
"""

from __future__ import annotations

import abc
import importlib.util
import random
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from gymverse.actions import find_boxed

SHIM_VERSION = "0+gymverse.shim"
# The exact marker GEM uses for "the episode is over" observations (fullwidth vertical bars, U+FF5C).
TERMINAL_STATE = "<\uff5cTERMINAL_STATE\uff5c>"


class LanguageGameReward:
    """GEM's reward constants for language games."""

    success_reward: float = 1.0
    internal_step_reward: float = 0.0
    fail_reward: float = 0.0
    invalid_action_reward: float = 0.0
    format_error_reward: float = -0.1


def set_seed(seed: int | None = None) -> None:
    """Seed Python's and NumPy's global generators, as GEM does."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - GEM envs draw from the legacy global generator


def np_random(seed: int | None = None) -> tuple[np.random.Generator, Any]:
    """A seeded NumPy Generator and the entropy it was built from."""
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative python int, got {seed!r}")
    seq = np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seq)), seq.entropy


def extract_last_boxed_answer(solution: str) -> str | None:
    r"""Content of the last balanced ``\boxed{...}`` in `solution`, or None."""
    found = find_boxed(solution)
    return found[-1] if found else None


class Env(abc.ABC):
    """Stand-in for ``gem.core.Env``."""

    @abc.abstractmethod
    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply one action; returns (observation, reward, terminated, truncated, info)."""

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode; a seed reseeds the global generators (GEM's behaviour)."""
        if seed is not None:
            set_seed(seed)
        return None, {}

    def sample_random_action(self) -> str:
        """A random action (GEM envs override this)."""
        raise NotImplementedError

    @property
    def unwrapped(self) -> Env:
        """The base env."""
        return self

    def spawn(self, same_state: bool = False, **kwargs: Any) -> Env:
        """Not provided by the shim."""
        raise NotImplementedError


class EnvWrapper(Env):
    """Stand-in for ``gem.core.EnvWrapper``: attribute reads fall through to the wrapped env."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Forward to the wrapped env."""
        return self.env.step(action)

    def reset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Forward to the wrapped env."""
        return self.env.reset(seed=seed)

    @property
    def unwrapped(self) -> Env:
        """The base env under the wrapper."""
        return self.env.unwrapped


def _module(name: str, doc: str, package: bool = False, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name, doc)
    if package:
        mod.__path__ = []
    mod.__dict__.update(attrs)
    mod.__gymverse_shim__ = True  # type: ignore[attr-defined]
    return mod


def _build() -> dict[str, types.ModuleType]:
    constants = _module(
        "gem.utils.constants",
        "GEM constants (GymVerse shim).",
        TERMINAL_STATE=TERMINAL_STATE,
        LanguageGameReward=LanguageGameReward,
    )
    seeding = _module("gem.utils.seeding", "GEM seeding (GymVerse shim).", set_seed=set_seed, np_random=np_random)
    parsing = _module(
        "gem.utils.parsing", "GEM parsing (GymVerse shim).", extract_last_boxed_answer=extract_last_boxed_answer
    )
    utils = _module(
        "gem.utils", "GEM utils (GymVerse shim).", package=True, constants=constants, seeding=seeding, parsing=parsing
    )
    core = _module("gem.core", "GEM core (GymVerse shim).", Env=Env, EnvWrapper=EnvWrapper)
    gem = _module(
        "gem", "GEM (GymVerse shim).", package=True, Env=Env, core=core, utils=utils, __version__=SHIM_VERSION
    )
    return {m.__name__: m for m in (gem, core, utils, constants, seeding, parsing)}


SHIM_MODULES: dict[str, types.ModuleType] = _build()
_LOCK = threading.RLock()


def real_gem_available() -> bool:
    """True when the real ``gem`` package (not this shim) can be imported."""
    mod = sys.modules.get("gem")
    if mod is not None:
        return not getattr(mod, "__gymverse_shim__", False)
    try:
        return importlib.util.find_spec("gem") is not None
    except (ImportError, ValueError):
        return False


@contextmanager
def gem_modules(use_shim: bool | None = None) -> Iterator[bool]:
    """Serve the shim as ``gem.*`` inside the block; yields whether the shim is in use.

    `use_shim` None means "only if the real package is missing"; True forces the shim (previous ``gem.*``
    entries are put back afterwards). The swap holds a lock, so concurrent loads do not interleave.
    """
    with _LOCK:
        if use_shim is None:
            use_shim = not real_gem_available()
        if not use_shim:
            yield False
            return
        saved = {name: sys.modules.get(name) for name in SHIM_MODULES}
        sys.modules.update(SHIM_MODULES)
        try:
            yield True
        finally:
            for name, previous in saved.items():
                if previous is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = previous
