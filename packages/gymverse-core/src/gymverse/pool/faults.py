"""Fault vocabulary shared by every backend: how an env failure is reported to the caller.

A failing env never raises out of a vector call. Its episode ends with ``truncated=True`` and an ``info`` that
names the failure, so a rollout engine can keep (or drop) the partial trajectory and carry on::

    info["error"]       = "ValueError: boom"          # exception type and message
    info["error_type"]  = "ValueError"                 # StepTimeout / WorkerCrashed for hangs and dead workers
    info["success"]     = False
"""

from __future__ import annotations

from typing import Any

#: Observation returned for an episode that ended because the env failed.
ERROR_OBSERVATION = "The environment failed and this episode was stopped: {error}"


class VectorError(RuntimeError):
    """Misuse of a vector env (bad actions, stepping a finished env with autoreset disabled, closed env)."""


class StepTimeout(Exception):
    """An env call ran longer than ``step_timeout`` (its worker is killed and replaced)."""


class WorkerCrashed(Exception):
    """The worker process or actor hosting an env died (e.g. SIGKILL, segfault, OOM) during a call."""


class InjectedFault:
    """Stand-in for an action whose call failed outside the env's own code (timeout, dead worker).

    Sent to the replacement worker so the env's slot ends the episode through the same path as an env exception.
    """

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        self.message = message

    def __reduce__(self) -> tuple[type[InjectedFault], tuple[str, str]]:
        return (InjectedFault, (self.error_type, self.message))


def describe(exc: BaseException | InjectedFault) -> tuple[str, str]:
    """(error_type, "Type: message") for an exception or injected fault."""
    if isinstance(exc, InjectedFault):
        etype, msg = exc.error_type, exc.message
    else:
        etype, msg = type(exc).__name__, str(exc)
    return etype, f"{etype}: {msg}" if msg else etype


def error_info(exc: BaseException | InjectedFault, *, during: str) -> dict[str, Any]:
    """The ``info`` dict of an episode ended by `exc` (raised during ``reset`` or ``step``)."""
    etype, text = describe(exc)
    return {"error": text, "error_type": etype, "error_during": during, "success": False}


def error_observation(info: dict[str, Any]) -> str:
    """The observation shown for an error-truncated episode."""
    return ERROR_OBSERVATION.format(error=info["error"])


#: Set by process workers and Ray actors; the ``vectest:Crash`` fixture only kills a process that carries it.
WORKER_ENV_FLAG = "GYMVERSE_VECTOR_WORKER"
