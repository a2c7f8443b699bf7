"""The determinism check of a hosted env from one recorded request instead of a round trip per call.

`HostedEnv.lockstep` asks the env host to make, in one request, the calls `checks.check_determinism` makes on two
fresh envs (reset both, then sample and step both in lockstep, then reset the first again) and to send back every
value in order. `replayed_pair` turns that record into two stand-in envs whose calls return the recorded values in
order; the check then runs unchanged against them, so every comparison and verdict is still made here, from the
env's own answers. The record is untrusted data: a call that does not match the next recorded one (what the host
did differs from what the check asks) raises `OffScript`, and the caller runs the check against the live envs
instead; an env call that raised in the host raises here at the same point, as the live call would have.
"""

from __future__ import annotations

from typing import Any

from gymverse.core import StepResult
from gymverse.sandbox.hosted import HostedEnv


class OffScript(BaseException):
    """The record does not hold the call the check makes next: check the live envs instead (a BaseException, so
    a check's own ``except Exception`` cannot turn it into a verdict)."""


class _Record:
    """The recorded calls of both envs, consumed in order."""

    def __init__(self, calls: list[Any], error: BaseException | None) -> None:
        self.calls, self.error, self.at = calls, error, 0

    def next(self, who: str, op: str) -> Any:
        if self.at >= len(self.calls):
            if self.error is not None:
                err, self.error = self.error, None
                raise err
            raise OffScript(f"the record ends before {who}.{op}")
        rec_who, rec_op, value = self.calls[self.at]
        if (rec_who, rec_op) != (who, op):
            raise OffScript(f"the record holds {rec_who}.{rec_op} where the check makes {who}.{op}")
        self.at += 1
        return value


class ReplayedEnv:
    """One of the two envs of a recorded lockstep: its calls return the host's recorded answers in order."""

    def __init__(self, live: HostedEnv, record: _Record, who: str) -> None:
        self._live, self._record, self._who = live, record, who

    def reset(self, seed: int | None = None) -> Any:
        """The recorded reset."""
        return self._record.next(self._who, "reset")

    def sample_random_action(self) -> Any:
        """The recorded random action."""
        return self._record.next(self._who, "sample")

    def step(self, action: str) -> Any:
        """The recorded step (a 5-tuple as a `StepResult`, as `HostedEnv.step` returns it)."""
        value = self._record.next(self._who, "step")
        return StepResult(*value) if isinstance(value, tuple) and len(value) == 5 else value

    def get_state(self) -> Any:
        """A token for the snapshot the host took (it stays there)."""
        self._record.next(self._who, "get_state")
        return {"replayed_state": self._who}

    def set_state(self, state: Any) -> None:
        """The recorded restore (of the snapshot the check took: the host restored the one it took)."""
        if state != {"replayed_state": self._who}:
            raise OffScript("set_state of a snapshot the record does not hold")
        self._record.next(self._who, "set_state")

    def clone(self) -> ReplayedEnv:
        """The recorded clone: an independent env of the same class (any other clone is checked live)."""
        if self._record.next(self._who, "clone") != "same":
            raise OffScript("the clone is not an independent env of the same class")
        return ReplayedEnv(self._live, self._record, "t")

    @property
    def done(self) -> Any:
        """The recorded read of ``done``."""
        return self._record.next(self._who, "done")

    @property
    def format_penalty(self) -> Any:
        """The recorded read of ``format_penalty``."""
        return self._record.next(self._who, "format_penalty")

    @property
    def max_turns(self) -> int:
        """The live env's turn budget as of its last answer (the lockstep's answer: after its resets)."""
        return self._live.max_turns

    @property
    def metadata(self) -> Any:
        """The live env's metadata (fixed when it was built)."""
        return self._live.metadata


def replayed_pair(a: HostedEnv, b: HostedEnv, seed: int, max_steps: int | None) -> tuple[ReplayedEnv, ReplayedEnv]:
    """Stand-ins for `a` and `b` (two fresh envs of one host) answering from one `HostedEnv.lockstep` request."""
    got = a.lockstep(b, seed, max_steps)
    record = _Record(got["calls"], got["error"])
    return ReplayedEnv(a, record, "a"), ReplayedEnv(b, record, "b")


def replayed(env: HostedEnv, check: str, seed: int, calls: int) -> ReplayedEnv:
    """A stand-in for `env` answering the checker function `check` from one `HostedEnv.recorded` request."""
    got = env.recorded(check, seed, calls)
    return ReplayedEnv(env, _Record(got["calls"], got["error"]), "a")


__all__ = ["OffScript", "ReplayedEnv", "replayed", "replayed_pair"]
