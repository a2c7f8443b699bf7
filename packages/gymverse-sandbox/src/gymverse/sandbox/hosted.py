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

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gymverse.complexity import check_level
from gymverse.sandbox._audit import MAX_RECORDS
from gymverse.sandbox._codec import CodecError, RemoteObject, decode
from gymverse.sandbox._host_connection import SERVE, _HostConnection, release_spare, spares
from gymverse.sandbox._host_errors import MAX_NAMES, EnvCallError, EnvHostError, EnvHostTimeout, remote_error
from gymverse.sandbox._hosted_env import HostedEnv, Played, gem_env
from gymverse.sandbox.config import SandboxLimits, SandboxResult
from gymverse.sandbox.host_registrations import recordable_checks
from gymverse.sandbox.runner import Backend


class EnvHost:
    """Builds envs in a sandboxed host process as ``factory(*args, complexity=level)`` and returns proxies.

    `factory` is ``"package.module:function"`` importable in the sandbox; `files` are placed in the job's working
    directory (e.g. the env file); `limits` bound the whole host process (its ``timeout`` is the host's total
    wall-clock budget, counted from when the process started); `call_timeout` bounds each call. With `prestart`,
    starting a host also starts the next one (its interpreter and imports overlap this session), which the next
    `EnvHost` with the same limits in this thread takes over: one idle spare per thread, stopped by
    `release_spare` or when the thread ends. With `forked`, each host process is instead forked from a warm zygote
    that has imported what hosts need once (`gymverse.sandbox._host_launch`: confined as a `SandboxPool` job, no
    interpreter start per host; `backend` and `prestart` then do not apply). `prepare`
    (``"package.module:function"``, called as ``prepare(*args)`` once per host process, audited like env calls)
    does the slow one-time work building needs, such as importing an installed suite, under its own
    `prepare_timeout` instead of the first build's deadline.
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
        forked: bool = False,
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
        self.prestart = prestart and not forked
        self.forked = forked
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
        return (self.limits, tuple(self.readable_paths), self.backend, self.forked)

    def _start(self) -> _HostConnection:
        key = self._key()
        spare: _HostConnection | None = getattr(spares, "spare", None)
        spares.spare = None
        # a spare's wall-clock budget runs from its start: one that idled away a quarter of it is not taken
        stale = spare is not None and time.monotonic() - spare.job.start > 0.25 * self.limits.timeout
        if spare is not None and (spare.key != key or spare.dead is not None or not spare.thread.is_alive() or stale):
            spare.close()
            spare = None
        session = spare or _HostConnection(key)
        if self.prestart:
            spares.spare = _HostConnection(key)  # starts now, in parallel with this env's whole session
        try:
            what = "starting the env host"
            checks = [list(pair) for pair in recordable_checks()]
            init = [self.factory, list(self.args), dict(self.files), checks]
            session.call("init", 0, init, what, self.call_timeout)
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
            attrs["gem_env"] = property(gem_env)
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
    "remote_error",
]
