"""`EnvHost`: untrusted env code in a sandbox process, driven from the trusted process through `HostedEnv` proxies.

Checking an env inside the env's own process lets the env rewrite the checker or print a forged report. Here the
env lives in a `gymverse.sandbox` job (`gymverse.sandbox.env_host`, same launcher, isolation and limits as
`Sandbox`) and the trusted process talks to it over two pipes, one length-prefixed JSON message per request and
per answer. `EnvHost.make(level)` returns a `HostedEnv`: a `gymverse.EnvLike` proxy whose reset/step/solve/state/
clone calls are requests, so `gymverse.checker.check_env(host.make)`, policies and probes run unchanged here and
every verdict is computed from the env's answers in this process.

Every answer is untrusted data: it must come after a request, carry that request's id, fit the size and depth caps
and decode (`_codec`); anything else (out-of-turn bytes, oversized or malformed frames) kills the host and raises
`EnvHostError` naming the violation. A call that does not answer within ``call_timeout`` (or the active
`gymverse.deadline.deadline`, in any thread) kills the host and raises `EnvHostTimeout`, a `CallTimeout`. A host
that exits mid-call raises `EnvHostError` with its exit status. The env's own exceptions come back as
`EnvCallError` subclasses named after the remote type (and deriving from the builtin of that name, so ``except
NotImplementedError`` still works). After a death, the next `make` starts a fresh host (at most ``max_restarts``
times); proxies of a dead host raise `EnvHostError`.

Use an `EnvHost` from the thread that created it: the sandbox's parent-death signal follows that thread.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gymverse import deadline as _deadline
from gymverse.complexity import ComplexitySpec, check_level
from gymverse.contract import EnvMetadata, StepResult
from gymverse.protocol import EnvLike
from gymverse.sandbox import _protocol
from gymverse.sandbox._audit import MAX_RECORDS
from gymverse.sandbox._codec import CodecError, RemoteObject, decode
from gymverse.sandbox.config import SandboxLimits, SandboxResult
from gymverse.sandbox.env_host import EXTRA_ATTRS
from gymverse.sandbox.runner import Backend, build_spec, finish, launch

SERVE = "gymverse.sandbox.env_host:serve"
#: Extra time the first call of a host gets: the interpreter starts and imports the env's dependencies.
STARTUP_GRACE = 20.0
#: How long a dying host gets to report how it ended before we give up waiting for the status.
DEATH_WAIT = 3.0
#: How long a closed host gets to exit on its own before it is killed.
GRACEFUL_EXIT = 2.0
MAX_NAMES = 256


class EnvHostError(Exception):
    """The env host cannot answer: it exited, broke the protocol, exceeded its limits, or was given up on."""


class EnvHostTimeout(_deadline.CallTimeout):
    """A hosted env did not answer a call in time; its host was killed."""


class EnvCallError(Exception):
    """The hosted env raised; the concrete class is named after the remote exception type."""

    remote_type: str = "Exception"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: Classes for the builtin exception names: a fixed set, so sharing them across hosts holds no env's state.
_BUILTIN_ERRORS: dict[str, type[EnvCallError]] = {}


def _error_class(name: str) -> type[EnvCallError]:
    """A class named `name` deriving from `EnvCallError` and from the builtin of that name, or from its nearest base
    that can be raised with one message (UnicodeDecodeError needs five arguments: ValueError stands in for it)."""
    builtin = getattr(builtins, name, None)
    bases = builtin.__mro__ if isinstance(builtin, type) and issubclass(builtin, Exception) else ()
    for base in bases:
        if base is Exception:
            break
        try:
            cls = types.new_class(name, (EnvCallError, base))
            cls("probe")
        except TypeError:  # its own C layout (OSError) or constructor (UnicodeDecodeError, ExceptionGroup)
            continue
        cls.__module__ = "gymverse.sandbox.hosted.remote"
        return cls
    cls = types.new_class(name, (EnvCallError,))
    cls.__module__ = "gymverse.sandbox.hosted.remote"
    return cls


def remote_error(
    type_name: Any, message: Any, traceback: Any = None, table: dict[str, type[EnvCallError]] | None = None
) -> EnvCallError:
    """The exception to raise for an env's remote exception (class named after it, builtin base kept).

    Builtin names always map to their class; other names are cached in `table`, the calling host's own (at most
    `MAX_NAMES`), so an env that raises thousands of made-up types changes nothing for another env.
    """
    name = str(type_name)[:100] if isinstance(type_name, str) and type_name.isidentifier() else "EnvCallError"
    builtin = isinstance(getattr(builtins, name, None), type)
    cache = _BUILTIN_ERRORS if builtin else table
    cls = cache.get(name) if cache is not None else None
    if cls is None:
        cls = _error_class(name)
        if cache is not None and (builtin or len(cache) < MAX_NAMES):
            cache[name] = cls
    err = cls(str(message)[:2000])
    err.remote_type = name
    if isinstance(traceback, str) and traceback:
        note = "in the env host:\n" + traceback[-3000:]
        if sys.version_info >= (3, 11):
            err.add_note(note)
        else:  # Python 3.10: the same __notes__ list (its traceback does not print it)
            err.__notes__ = [*getattr(err, "__notes__", []), note]  # type: ignore[attr-defined,unused-ignore]
    return err


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _HostConnection:
    """One env host process: the pipes to it, its supervisor thread, and the request/answer discipline."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        limits, readable_paths, backend = key
        self.key = key
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        spec = build_spec("callable", target=SERVE, limits=limits, readable_paths=readable_paths)
        try:
            self.job = launch(spec, None, backend, stdio=(req_r, ans_w))
        except BaseException:
            for fd in (req_w, ans_r):
                os.close(fd)
            raise
        finally:
            os.close(req_r)
            os.close(ans_w)
        self.req, self.ans = req_w, ans_r
        os.set_blocking(self.req, False)
        os.set_blocking(self.ans, False)
        self.pidfd = os.dup(self.job.pidfd)  # ours to signal: the supervisor thread closes the original
        self.result: SandboxResult | None = None
        self.dead: str | None = None
        self.seq = 0
        self.fresh = True
        self.garbage: list[int] = []
        #: This host's exception classes by remote name (`remote_error`).
        self.errors: dict[str, type[EnvCallError]] = {}
        #: ``(kind, detail)`` of what env code tried outside its box (`gymverse.sandbox._audit`), as reported.
        self.audit: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._supervise, name="gymverse-env-host", daemon=True)
        self.thread.start()

    def _supervise(self) -> None:
        self.result = finish(self.job)

    # ------------------------------------------------------------------------------------------ one request
    def call(self, op: str, eid: int, args: list[Any], what: str, timeout: float) -> dict[str, Any]:
        """Send one request and return its answer's body; raises for remote exceptions and host failures."""
        with self.lock:
            if self.dead is not None:
                raise EnvHostError(f"the env host is gone ({self.dead}); cannot run {what}")
            if self.fresh:
                timeout += STARTUP_GRACE
            self.seq += 1
            msg: dict[str, Any] = {"id": self.seq, "op": op, "env": eid, "args": args}
            if self.garbage:
                msg["drop"], self.garbage = self.garbage, []
            try:
                if select.select([self.ans], [], [], 0)[0]:
                    raise self._violation(f"it wrote to the protocol channel out of turn (before {what})")
                ends, expired = self._ends(timeout, what)
                self._send(_protocol.frame(msg), ends, expired, what)
                answer = self._receive(ends, expired, what)
            except BaseException as err:
                if self.dead is None:  # a deadline, Ctrl-C or our own error mid-call: the protocol state is lost
                    self.kill(f"interrupted during {what}: {type(err).__name__}")
                raise
            self.fresh = False
            self._take_audit(answer.get("audit"))
        if answer.get("ok") is True:
            return answer
        raise remote_error(answer.get("type"), answer.get("message"), answer.get("traceback"), self.errors)

    def _take_audit(self, raw: Any) -> None:
        """Keep the well-formed audit records of an answer (untrusted data: shape and size checked)."""
        if not isinstance(raw, list):
            return
        for item in raw[:MAX_RECORDS]:
            if len(self.audit) >= MAX_RECORDS:
                return
            if isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item):
                self.audit.append((item[0][:40], item[1][:300]))

    def _ends(self, timeout: float, what: str) -> tuple[float, BaseException]:
        now = time.monotonic()
        expired: BaseException = EnvHostTimeout(
            f"the env did not answer {what} within {timeout:g}s (its host was stopped)"
        )
        active = _deadline.remaining()
        if active is not None and active[0] < timeout:
            return now + max(0.0, active[0]), _deadline.CallTimeout(f"{active[1]} (waiting for {what})")
        return now + timeout, expired

    def _send(self, data: bytes, ends: float, expired: BaseException, what: str) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.req, view) :]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise self._died(what) from None
            if not select.select([], [self.req], [], max(0.0, ends - time.monotonic()))[1]:
                self.kill(f"no answer to {what} in time")
                raise expired

    def _receive(self, ends: float, expired: BaseException, what: str) -> dict[str, Any]:
        head = _protocol.FRAME_HEADER.size
        buf = bytearray()
        need = head
        while len(buf) < need:
            if not select.select([self.ans], [], [], max(0.0, ends - time.monotonic()))[0]:
                self.kill(f"no answer to {what} in time")
                raise expired
            chunk = os.read(self.ans, 1 << 20)
            if not chunk:
                raise self._died(what)
            buf += chunk
            if need == head and len(buf) >= head:
                (size,) = _protocol.FRAME_HEADER.unpack(bytes(buf[:head]))
                if size > _protocol.RESULT_CAP:
                    raise self._violation(
                        f"it announced a {size}-byte message for {what} (limit {_protocol.RESULT_CAP})"
                    )
                need = head + size
        if len(buf) > need or select.select([self.ans], [], [], 0)[0]:
            raise self._violation(f"it wrote more than one answer to {what}")
        msg = _protocol.parse(bytes(buf[head:]))
        if msg is None:
            raise self._violation(f"its answer to {what} is not a JSON object within the size and depth limits")
        if msg.get("id") != self.seq:
            raise self._violation(f"its answer to {what} carries id {_short(msg.get('id'))}, not {self.seq}")
        return msg

    # ------------------------------------------------------------------------------------------ failures
    def _violation(self, why: str) -> EnvHostError:
        self.kill(f"protocol violation: {why}")
        return EnvHostError(f"the env host broke the protocol: {why}; it was stopped")

    def _died(self, what: str) -> EnvHostError:
        self.thread.join(DEATH_WAIT)
        res = self.result
        if res is None:
            how = "closed its answer channel"
        else:
            how = f"ended ({res.status}: {res.error or 'exit code ' + str(res.exit_code)})"
            lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
            if lines and res.status != "timeout":
                how += f"; last stderr line: {lines[-1][:300]}"
        self.kill(f"{how} during {what}")
        return EnvHostError(f"the env process {how} during {what}")

    def kill(self, reason: str) -> None:
        """Stop the host (its whole PID namespace goes with the launcher) and remember why."""
        if self.dead is None:
            self.dead = reason
        if self.thread.is_alive():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def close(self) -> None:
        """End the host: close its request pipe (it exits on its own), kill it if it lingers, release the pipes."""
        if self.dead is None and self.thread.is_alive():
            os.close(self.req)
            self.req = -1
            self.thread.join(GRACEFUL_EXIT)
        self.kill("closed")
        self.thread.join(10.0)
        for fd in (self.req, self.ans, self.pidfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.req = self.ans = self.pidfd = -1


#: This thread's warm spare host (see `EnvHost` ``prestart``): per thread, because a host dies with the thread
#: that started it.
_warm = threading.local()


def release_spare() -> None:
    """Stop this thread's warm spare host, if any."""
    spare: _HostConnection | None = getattr(_warm, "spare", None)
    _warm.spare = None
    if spare is not None:
        spare.close()


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

    def __init__(self, host: EnvHost, session: _HostConnection, answer: dict[str, Any]) -> None:
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
        what = f"step({_short(text)})"
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


def _gem_env(self: HostedEnv) -> types.SimpleNamespace:
    """A snapshot of the hosted GEM object's scalar attributes."""
    value = self._value(self._call("gem_attrs", [], "reading the GEM object"), "reading the GEM object")
    return types.SimpleNamespace(**{str(k): v for k, v in dict(value).items()})


class EnvHost:
    """Builds envs in a sandboxed host process as ``factory(*args, complexity=level)`` and returns proxies.

    `factory` is ``"package.module:function"`` importable in the sandbox; `files` are placed in the job's working
    directory (e.g. the env file); `limits` bound the whole host process (its ``timeout`` is the host's total
    wall-clock budget, counted from when the process started); `call_timeout` bounds each call. With `prestart`,
    starting a host also starts the next one (its interpreter and imports overlap this session), which the next
    `EnvHost` with the same limits in this thread takes over: one idle spare per thread, stopped by
    `release_spare` or when the thread ends. `prepare` (``"package.module:function"``, called as
    ``prepare(*args)`` once per host process, audited like env calls) does the slow one-time work building needs,
    such as importing an installed suite, under its own `prepare_timeout` instead of the first build's deadline.
    """

    def __init__(
        self,
        factory: str,
        args: Sequence[Any] = (),
        *,
        files: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        call_timeout: float = 10.0,
        max_restarts: int = 2,
        readable_paths: Sequence[str] = (),
        backend: Backend = "auto",
        prestart: bool = False,
        prepare: str | None = None,
        prepare_timeout: float = 60.0,
    ) -> None:
        if call_timeout <= 0:
            raise ValueError(f"call_timeout must be positive, got {call_timeout!r}")
        self.factory, self.args = factory, list(args)
        json.dumps(self.args)  # fails here, not in the sandbox
        self.files = {n: t if isinstance(t, str) else t.decode() for n, t in (files or {}).items()}
        self.limits = limits or SandboxLimits(timeout=600.0)
        self.call_timeout = float(call_timeout)
        self.max_restarts = max_restarts
        self.readable_paths = list(readable_paths)
        self.backend: Backend = backend
        self.prestart = prestart
        self.prepare, self.prepare_timeout = prepare, max(float(prepare_timeout), self.call_timeout)
        self.starts = 0
        #: How the last host process ended (set when it is closed or replaced).
        self.result: SandboxResult | None = None
        self._session: _HostConnection | None = None
        self._last_death: str | None = None
        self._classes: dict[str, type[HostedEnv]] = {}
        self._audit: list[tuple[str, str]] = []

    @property
    def audit(self) -> list[tuple[str, str]]:
        """``(kind, detail)`` of every attempt env code made outside its box, over all host processes so far."""
        now = self._session.audit if self._session is not None else []
        return [*self._audit, *now][:MAX_RECORDS]

    def _key(self) -> tuple[Any, ...]:
        return (self.limits, tuple(self.readable_paths), self.backend)

    def _start(self) -> _HostConnection:
        key = self._key()
        spare: _HostConnection | None = getattr(_warm, "spare", None)
        _warm.spare = None
        # a spare's wall-clock budget runs from its start: one that idled away a quarter of it is not taken
        stale = spare is not None and time.monotonic() - spare.job.start > 0.25 * self.limits.timeout
        if spare is not None and (spare.key != key or spare.dead is not None or not spare.thread.is_alive() or stale):
            spare.close()
            spare = None
        session = spare or _HostConnection(key)
        if self.prestart:
            _warm.spare = _HostConnection(key)  # starts now, in parallel with this env's whole session
        try:
            what = "starting the env host"
            session.call("init", 0, [self.factory, list(self.args), dict(self.files)], what, self.call_timeout)
            if self.prepare is not None:
                session.call("prepare", 0, [self.prepare], "preparing the env (imports)", self.prepare_timeout)
        except BaseException:
            session.close()
            raise
        return session

    def _live(self) -> _HostConnection:
        if self._session is not None and self._session.dead is None:
            return self._session
        if self._session is not None:
            self._last_death = self._session.dead
            self.close()
        if self.starts > self.max_restarts:
            raise EnvHostError(
                f"the env host died {self.starts} times; not restarting it again (last: {self._last_death})"
            )
        self.starts += 1
        self._session = self._start()
        return self._session

    def start(self) -> None:
        """Start the host process now (its init and `prepare`), so that no build deadline pays for it."""
        self._live()

    def make(self, complexity: int = 1) -> HostedEnv:
        """A new env at `complexity`, built in the host (a fresh host when the last one died)."""
        level = check_level(complexity)
        session = self._live()
        answer = session.call("make", 0, [level], f"building the env at level {level}", self.call_timeout)
        return self.proxy(session, answer)

    __call__ = make

    def proxy(self, session: _HostConnection, answer: dict[str, Any]) -> HostedEnv:
        """The proxy for the env an answer describes (one proxy class per remote class)."""
        return self._class(answer.get("class") or {})(self, session, answer)

    def _class(self, desc: Mapping[str, Any]) -> type[HostedEnv]:
        key = json.dumps(desc, sort_keys=True)
        cls = self._classes.get(key)
        if cls is not None:
            return cls
        name = str(desc.get("name") or "HostedEnv")[:100]
        attrs: dict[str, Any] = {"__module__": f"hosted:{str(desc.get('module'))[:100]}", "gem": bool(desc.get("gem"))}
        for field in ("complexity_params", "param_variance"):
            raw = desc.get(field)
            if isinstance(raw, list) and raw and raw[0] == "ok":
                try:
                    value = decode(raw[1])
                except CodecError:
                    value = None
                attrs[field] = value if isinstance(value, dict) else {}
            elif isinstance(raw, list) and len(raw) == 3:
                attrs["class_error"] = [raw[1], f"{field}: {raw[2]}"]
        if attrs["gem"]:
            attrs["gem_env"] = property(_gem_env)
        cls = type(name, (HostedEnv,), attrs)
        if len(self._classes) < MAX_NAMES:
            self._classes[key] = cls
        return cls

    def close(self) -> None:
        """Stop the host process (it exits on its own when idle); its outcome lands in `result`."""
        if self._session is not None:
            self._session.close()
            self._audit += self._session.audit
            self.result = self._session.result
            self._session = None

    def __enter__(self) -> EnvHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "SERVE",
    "EnvCallError",
    "EnvHost",
    "EnvHostError",
    "EnvHostTimeout",
    "HostedEnv",
    "Played",
    "RemoteObject",
    "release_spare",
]
