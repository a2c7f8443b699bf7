"""Host side of a recorded check: run one checker function against an env here and write down every env call.

The trusted side (`gymverse.checker._replay`) asks for a record instead of making a check's calls one round trip
at a time, then runs the same check itself against the record. Nothing computed here is trusted: the check's own
result is thrown away, and a record that differs from what the trusted check asks for is replaced by live calls.
Env code can rewrite this module (it shares the process); that only changes what the record says, which the
env could have answered call by call anyway.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

from gymverse.sandbox._codec import encode


class _Stop(Exception):
    """An env call raised: the record ends there."""


class Log:
    """The calls made so far (``[env, op, value]``) and the env exception that ended them, if any."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.error: list[str] | None = None

    def call(self, who: str, op: str, fn: Callable[[], Any], keep: bool = True) -> Any:
        """``fn()``, written down (its value only when `keep`); an exception of the env ends the record."""
        try:
            value = fn()
        except Exception as err:
            tb = "".join(traceback.format_exception(type(err), err, err.__traceback__, limit=-6))[-4000:]
            self.error = [type(err).__name__, str(err)[:2000], tb]
            raise _Stop from None
        self.calls.append([who, op, encode(value) if keep else None])
        return value


class Recording:
    """An env whose calls and the attributes a check reads are written to a `Log` as they happen."""

    def __init__(self, env: Any, who: str, log: Log) -> None:
        self._env, self._who, self._log = env, who, log

    def _rec(self, op: str, fn: Callable[[], Any], keep: bool = True) -> Any:
        return self._log.call(self._who, op, fn, keep)

    def reset(self, seed: int | None = None) -> Any:
        """Recorded reset."""
        return self._rec("reset", lambda: self._env.reset(seed=seed))

    def sample_random_action(self) -> Any:
        """Recorded random action."""
        return self._rec("sample", self._env.sample_random_action)

    def step(self, action: Any) -> Any:
        """Recorded step (of the action as text, as `HostedEnv.step` sends it)."""
        text = action if isinstance(action, str) else str(action)
        return self._rec("step", lambda: self._env.step(text))

    def get_state(self) -> Any:
        """The real snapshot (it stays here); the record notes only that it was taken."""
        return self._rec("get_state", self._env.get_state, keep=False)

    def set_state(self, state: Any) -> None:
        """Recorded restore."""
        self._rec("set_state", lambda: self._env.set_state(state), keep=False)

    def clone(self) -> Any:
        """The clone, recording whether it is an independent env of the same class (``"same"``) or not."""
        twin = self._rec("clone", self._env.clone, keep=False)
        kind = "self" if twin is self._env else "same" if type(twin) is type(self._env) else "other"
        self._log.calls[-1][2] = kind
        if kind != "same":
            raise _Stop  # the trusted side describes such a clone from the live proxy
        return Recording(twin, "t", self._log)

    @property
    def done(self) -> Any:
        """Recorded read of ``done``."""
        return self._rec("done", lambda: self._env.done)

    @property
    def format_penalty(self) -> Any:
        """Recorded read of ``format_penalty``."""
        return self._rec("format_penalty", lambda: self._env.format_penalty)


def record(env: Any, target: str, seed: int) -> dict[str, Any]:
    """Run the recordable check `target` (``"module:function"``, registered in ``gymverse.recordable_checks``) on
    `env` from `seed`; ``{"calls": [...], "error": [...] or None}``."""
    import importlib

    module, _, attr = target.partition(":")
    check = getattr(importlib.import_module(module), attr)
    log = Log()
    # _Stop, or the check failing on what the env returned: the record ends there
    with contextlib.suppress(Exception):
        check(Recording(env, "a", log), int(seed))
    return {"calls": log.calls, "error": log.error}


__all__ = ["Log", "Recording", "record"]
