"""`HostedEnv`: a `gymverse.EnvLike` proxy whose calls are requests to an env host; `Played` episodes.

Attributes the env computes come back with each answer; values are decoded from the host's tagged JSON
(`gymverse.sandbox._codec`); the env's exceptions are rebuilt as `EnvCallError` subclasses. Batched requests
(`play`, `plays`, `lockstep`, `recorded`, `resets`) only save round trips: the caller judges what comes back.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from gymverse.complexity import ComplexitySpec, check_level
from gymverse.contract import EnvMetadata, StepResult
from gymverse.protocol import EnvLike
from gymverse.sandbox._codec import CodecError, decode
from gymverse.sandbox._host_connection import _HostConnection, short
from gymverse.sandbox._host_errors import EnvCallError, EnvHostError, remote_error
from gymverse.sandbox.env_host import EXTRA_ATTRS


class EnvMaker(Protocol):
    """What a proxy needs of the `gymverse.sandbox.hosted.EnvHost` that built it."""

    call_timeout: float

    def proxy(self, session: _HostConnection, answer: dict[str, Any]) -> HostedEnv:
        """The proxy for the env an answer describes."""
        ...


class _StateHandle:
    """A snapshot that stays in the env host (its `get_state` may hold anything); copies share it."""

    def __init__(self, session: _HostConnection, handle: int) -> None:
        self.session, self.handle = session, handle

    def __deepcopy__(self, memo: dict[int, Any]) -> _StateHandle:
        return self

    def __copy__(self) -> _StateHandle:
        return self


@dataclass
class Played:
    """A hosted episode (`HostedEnv.play`): what reset returned (None without reset), every (action, step result)
    in order, and the exception that ended it early, if any."""

    reset: Any
    steps: list[tuple[Any, Any]]
    error: EnvCallError | None

    @property
    def timed_out(self) -> bool:
        """The episode did not end within the time `HostedEnv.plays` gave it."""
        return self.error is not None and self.error.remote_type == "CallTimeout"


def _played(value: Any, what: str, session: _HostConnection) -> Played:
    if not isinstance(value, dict) or not isinstance(value.get("steps"), list):
        raise EnvHostError(f"the env host answered {what} in the wrong form")
    steps: list[tuple[Any, Any]] = []
    for entry in value["steps"]:
        if not (isinstance(entry, list | tuple) and len(entry) == 2):
            raise EnvHostError(f"the env host answered {what} in the wrong form")
        res = entry[1]
        steps.append((entry[0], StepResult(*res) if isinstance(res, tuple) and len(res) == 5 else res))
    error = value.get("error")
    err = None
    if isinstance(error, list | tuple) and len(error) == 3:
        err = remote_error(error[0], error[1], error[2], session.errors)
    return Played(value.get("reset"), steps, err)


class HostedEnv:
    """An `EnvLike` whose code runs in an `EnvHost`; every call is a request, every value comes back decoded.

    Build with `EnvHost.make`. Attributes the env computes (complexity, max_turns, params, turn, done) are those
    the host reported with its last answer; class-level declarations (complexity params, variance) are the
    remote class's, so `complexity_spec` works here.
    """

    gem: ClassVar[bool] = False
    #: The remote class's declarations (set on the per-class proxy type by `EnvHost`).
    complexity_params: ClassVar[Mapping[str, Any]] = {}
    param_variance: ClassVar[Mapping[str, float]] = {}
    class_error: ClassVar[list[Any] | None] = None

    def __init__(self, host: EnvMaker, session: _HostConnection, answer: dict[str, Any]) -> None:
        self._host, self._session, self._eid = host, session, int(answer["env"])
        self._closed = False
        self._desc = answer
        self._sync: dict[str, Any] = dict(answer.get("sync") or {})
        for name, raw in dict(answer.get("attrs") or {}).items():
            if name in EXTRA_ATTRS:
                setattr(self, name, self._field(raw, name))

    # ------------------------------------------------------------------------------------------ plumbing
    def _call(self, op: str, args: list[Any], what: str, calls: int = 1) -> dict[str, Any]:
        answer = self._session.call(op, self._eid, args, what, self._host.call_timeout * calls)
        if isinstance(answer.get("sync"), dict):
            self._sync.update(answer["sync"])
        return answer

    def _value(self, answer: dict[str, Any], what: str) -> Any:
        try:
            return decode(answer.get("value"))
        except CodecError as err:
            self._session.kill(f"malformed value: {err}")
            raise EnvHostError(f"the env host's answer to {what} holds a malformed value: {err}") from None

    def _field(self, raw: Any, name: str) -> Any:
        if isinstance(raw, list) and len(raw) == 2 and raw[0] == "ok":
            try:
                return decode(raw[1])
            except CodecError as err:
                raise EnvHostError(f"the env host reported a malformed {name}: {err}") from None
        if isinstance(raw, list) and len(raw) == 3 and raw[0] == "err":
            raise remote_error(raw[1], f"{raw[2]}", table=self._session.errors)
        raise EnvHostError(f"the env host did not report {name}")

    def _synced(self, name: str) -> Any:
        return self._field(self._sync.get(name), name)

    # ------------------------------------------------------------------------------------------ EnvLike contract
    @property
    def metadata(self) -> EnvMetadata:
        """The remote env's metadata (rebuilt as `EnvMetadata` when it is one)."""
        md = self._field(self._desc.get("metadata"), "metadata")
        if isinstance(md, dict) and isinstance(md.get("EnvMetadata"), dict):
            try:
                return EnvMetadata(**md["EnvMetadata"])
            except TypeError:
                pass
        other: Any = md.get("other") if isinstance(md, dict) else md
        return other  # not EnvMetadata: the metadata check reports its type

    @property
    def format_penalty(self) -> float:
        """The remote env's format penalty."""
        return self._field(self._desc.get("format_penalty"), "format_penalty")

    @classmethod
    def complexity_spec(cls) -> ComplexitySpec:
        """The remote class's declared complexity parameters."""
        if cls.class_error is not None:
            raise remote_error(cls.class_error[0], cls.class_error[1])
        return ComplexitySpec(dict(cls.complexity_params), dict(cls.param_variance))

    @property
    def complexity(self) -> int:
        """The remote env's (pending or current) level."""
        return self._synced("complexity")

    @property
    def max_turns(self) -> int:
        """The remote env's turn budget."""
        return self._synced("max_turns")

    @property
    def params(self) -> dict[str, Any]:
        """The remote env's resolved params (as of its last reset)."""
        return self._synced("params")

    @property
    def turn(self) -> int:
        """Turns taken in the remote env's episode."""
        return self._synced("turn")

    @property
    def done(self) -> bool:
        """Whether the remote env's episode ended."""
        return self._synced("done")

    @property
    def seed_value(self) -> int | None:
        """The remote env's last seed."""
        return self._synced("seed")

    def set_complexity(self, level: int) -> None:
        """Request `level` for the next reset (validated here first, like `Env.set_complexity`)."""
        self._call("set_complexity", [check_level(level)], f"set_complexity({level})")

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the remote env; returns what it returned."""
        what = f"reset(seed={seed})"
        return self._value(self._call("reset", [None if seed is None else int(seed)], what), what)

    def step(self, action: str) -> StepResult:
        """Step the remote env; a 5-tuple comes back as a `StepResult`, anything else as it was returned."""
        text = action if isinstance(action, str) else str(action)
        what = f"step({short(text)})"
        value = self._value(self._call("step", [text], what), what)
        if isinstance(value, tuple) and len(value) == 5:
            return StepResult(*value)
        return value

    def solve(self) -> str:
        """The remote oracle's action."""
        return self._value(self._call("solve", [], "solve()"), "solve()")

    def sample_random_action(self) -> str:
        """The remote env's random action."""
        what = "sample_random_action()"
        return self._value(self._call("sample", [], what), what)

    def close(self) -> None:
        """Close the remote env with the next request to its host (no round trip of its own; its errors, like
        those of every `close` the checker makes, are not reported)."""
        if self._session.dead is None and not self._closed:
            self._closed = True
            self._session.garbage.append(self._eid)

    def get_state(self) -> dict[str, Any]:
        """A handle to a snapshot kept in the host."""
        answer = self._call("get_state", [], "get_state()")
        return {"hosted_state": _StateHandle(self._session, int(answer["value"]))}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken with `get_state` from an env of the same host."""
        handle = state.get("hosted_state") if isinstance(state, Mapping) else None
        if not isinstance(handle, _StateHandle) or handle.session is not self._session:
            raise ValueError("set_state needs a snapshot taken with get_state() from an env of the same env host")
        self._call("set_state", [handle.handle], "set_state()")

    def clone(self) -> EnvLike:
        """An independent copy made by the remote env's `clone` (this proxy when it returned itself)."""
        answer = self._call("clone", [], "clone()")
        if int(answer["env"]) == self._eid:
            return self
        return self._host.proxy(self._session, answer)

    def __deepcopy__(self, memo: dict[int, Any]) -> EnvLike:
        return self.clone()

    def play(
        self,
        policy: str,
        *,
        seed: int | None = None,
        reset: bool = True,
        action: str | None = None,
        limit: int | None = None,
    ) -> Played:
        """One whole episode in one request (see `Played`): (reset with `seed`,) then ``random``, ``oracle`` or
        ``constant`` (`action`, or the env's first random action) until it ends, raises, or takes `limit` steps
        (default: its max_turns + 1). The caller judges the transcript; this only saves round trips."""
        if policy not in ("random", "oracle", "constant"):
            raise ValueError(f"policy must be random, oracle or constant, got {policy!r}")
        article = "an" if policy == "oracle" else "a"
        what = f"{article} {policy} episode" + (f" (seed {seed})" if reset else "")
        answer = self._call("play", [seed, reset, policy, action, limit], what, calls=2)
        return _played(self._value(answer, what), what, self._session)

    def plays(
        self, episodes: Sequence[tuple[int, str, str | None]], timeout: float, limit: int | None = None
    ) -> list[Played | None]:
        """Several `play` episodes from ``reset(seed)``, each ``(seed, policy, action)``, in one request. Each
        should end within `timeout`: one that does not comes back with a `CallTimeout` error (`Played.timed_out`)
        and the rest as None; the whole request is bounded by the caller's deadline and ``call_timeout``."""
        what = f"{len(episodes)} episodes"
        args = [[[int(s), p, a, limit] for s, p, a in episodes], float(timeout)]
        value = self._value(self._call("plays", args, what, calls=len(episodes) + 1), what)
        if not isinstance(value, list) or len(value) != len(episodes):
            raise EnvHostError(f"the env host answered {what} in the wrong form")
        return [None if v is None else _played(v, what, self._session) for v in value]

    def lockstep(self, other: HostedEnv, seed: int, max_steps: int | None) -> dict[str, Any]:
        """The determinism check's calls on this env and `other` (same host) in one request: ``{"calls": [[env,
        op, value], ...], "error": exception or None}``, values decoded; judged by `gymverse.checker._replay`."""
        if other._session is not self._session:
            raise ValueError("lockstep needs two envs of the same env host")
        what = f"the determinism episode (seed {seed})"
        budget = 2 * (max_steps or int(self.max_turns) + 1) + 4
        value = self._value(self._call("lockstep", [other._eid, int(seed), max_steps], what, calls=budget), what)
        return self._record(value, what)

    def recorded(self, check: str, seed: int, calls: int) -> dict[str, Any]:
        """The env calls of the checker function `check` (``state_checks``, ``malformed``) from `seed`, made in
        the host in one request (about `calls` calls' time): ``{"calls": [[env, op, value], ...], "error":
        exception or None}``, judged by `gymverse.checker._replay`."""
        what = f"the {check} calls (seed {seed})"
        return self._record(self._value(self._call("record", [check, int(seed)], what, calls=calls), what), what)

    def _record(self, value: Any, what: str) -> dict[str, Any]:
        """A recorded-calls answer checked for form, its exception rebuilt."""
        calls = value.get("calls") if isinstance(value, dict) else None
        error = value.get("error") if isinstance(value, dict) else None
        if not isinstance(calls, list) or not all(isinstance(c, list) and len(c) == 3 for c in calls):
            raise EnvHostError(f"the env host answered {what} in the wrong form")
        err = None
        if isinstance(error, list) and len(error) == 3:
            err = remote_error(error[0], error[1], error[2], self._session.errors)
        return {"calls": calls, "error": err}

    def resets(self, seeds: Sequence[int], look: int = 0, timeout: float = 0.0) -> list[tuple[str, Any]]:
        """``reset(seed)`` for each seed in one request, each within `timeout` (0: no limit): per seed ``("ok",
        None)``, for the first `look` seeds ``("ok", (first observation as text, the GEM object's scalar
        attributes or None))``, ``("error", exception)``, or ``("hang", message)``, which ends the list; an error
        is the env's own and does not stop the rest."""
        what = f"{len(seeds)} resets"
        args = [[int(s) for s in seeds], int(look), float(timeout)]
        value = self._value(self._call("resets", args, what, calls=len(seeds) + 1), what)
        short = isinstance(value, list) and 0 < len(value) < len(seeds) and value[-1][:1] != ["hang"]
        if not isinstance(value, list) or not 0 < len(value) <= len(seeds) or short:
            raise EnvHostError(f"the env host answered {what} in the wrong form")
        out: list[tuple[str, Any]] = []
        for item in value:
            if isinstance(item, list) and item[:1] == ["ok"]:
                out.append(("ok", (str(item[1]), item[2]) if len(item) == 3 else None))
            elif isinstance(item, list) and len(item) == 3 and item[0] == "err":
                out.append(("error", remote_error(item[1], item[2], table=self._session.errors)))
            elif isinstance(item, list) and len(item) == 2 and item[0] == "hang":
                out.append(("hang", str(item[1])[:500]))
            else:
                raise EnvHostError(f"the env host answered {what} in the wrong form")
        return out

    # ------------------------------------------------------------------------------------------ evidence
    def instance_state(self) -> Any:
        """The env's generated instance (attributes beyond `Env`'s bookkeeping), canonicalized in the host."""
        return self._value(self._call("instance_state", [], "reading the instance"), "reading the instance")

    def global_rng_changes(self) -> list[str]:
        """Which global generators of the host changed since this env was built (from the checker's sentinel)."""
        value = self._value(self._call("rng_changed", [], "reading the global RNGs"), "reading the global RNGs")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise EnvHostError("the env host reported its global RNG state in the wrong form")
        return [v[:40] for v in value]

    @property
    def unwrapped(self) -> HostedEnv:
        """Itself: the proxy wraps nothing local."""
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} hosted #{self._eid}>"

    def __enter__(self) -> HostedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None and session.dead is None and not getattr(self, "_closed", True):
            session.garbage.append(self._eid)  # dropped with the next request: no I/O from a finalizer


#: Checked by mypy: the proxy implements the whole protocol (a missing or mistyped member fails the type check).
_IMPLEMENTS: type[EnvLike] = HostedEnv


def gem_env(self: HostedEnv) -> types.SimpleNamespace:
    """A snapshot of the hosted GEM object's scalar attributes."""
    value = self._value(self._call("gem_attrs", [], "reading the GEM object"), "reading the GEM object")
    return types.SimpleNamespace(**{str(k): v for k, v in dict(value).items()})


__all__ = ["EnvMaker", "HostedEnv", "Played", "gem_env"]
