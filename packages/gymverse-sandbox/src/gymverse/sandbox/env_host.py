"""The sandboxed half of a hosted env: load untrusted env code, answer one request at a time, hold no verdicts.

`serve` is the callable a `gymverse.sandbox` job runs (see `gymverse.sandbox.hosted`, the trusted half). Requests
arrive length-prefixed on stdin, answers leave length-prefixed on stdout; before any env code is imported both are
moved to private descriptors and fd 0/1 become ``/dev/null``/stderr, so whatever the env prints lands in the job's
stderr. Nothing here decides whether an env is correct: it only builds envs with the given factory and reports
what they return or raise. Env code shares this process and can rewrite any of it, so the trusted side treats every
answer as untrusted data (size, depth and framing checked, one answer per request, out-of-turn bytes fatal).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from gymverse.sandbox import _audit, _protocol
from gymverse.sandbox._codec import encode

#: Attributes some envs (GEM adapters) carry that evaluation reads; copied to the proxy when present.
EXTRA_ATTRS = (
    "success_rule",
    "success_rule_note",
    "success_rule_source",
    "complexity_knob",
    "complexity_fixed",
    "gem_uses_numpy",
)
REQUEST_CAP = 64 * 1024 * 1024


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _import(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _field(fn: Callable[[], Any]) -> list[Any]:
    """``["ok", value]`` or ``["err", type name, message]``: a property that raises is reported, not fatal."""
    try:
        return ["ok", encode(fn())]
    except Exception as err:
        return ["err", type(err).__name__, str(err)[:500]]


class Host:
    """The envs of one session, by id, and the operations the trusted side may request on them."""

    def __init__(self) -> None:
        self.factory: Callable[..., Any] | None = None
        self.args: list[Any] = []
        self.envs: dict[int, Any] = {}
        self.states: dict[int, tuple[int, Any]] = {}
        self.classes: dict[type, int] = {}
        self.sentinels: dict[int, Any] = {}  # env id -> GlobalRngSnapshot taken before building it
        self.recordable: dict[str, str] = {}
        self.next_id = 1

    def _register(self, env: Any) -> int:
        eid, self.next_id = self.next_id, self.next_id + 1
        self.envs[eid] = env
        return eid

    def _describe(self, env: Any) -> dict[str, Any]:
        cls = type(env)
        desc: dict[str, Any] = {
            "class": {
                "name": cls.__name__,
                "module": str(getattr(cls, "__module__", "")),
                "complexity_params": _field(lambda: dict(cls.complexity_params)),
                "param_variance": _field(lambda: dict(cls.param_variance)),
                "gem": hasattr(env, "gem_env"),
            },
            "metadata": _field(lambda: _metadata(env)),
            "format_penalty": _field(lambda: env.format_penalty),
            "attrs": {n: _field(functools.partial(getattr, env, n)) for n in EXTRA_ATTRS if hasattr(env, n)},
        }
        return {**desc, **self._sync(env, params=True)}

    def _sync(self, env: Any, params: bool = False) -> dict[str, Any]:
        out = {
            "complexity": _field(lambda: env.complexity),
            "max_turns": _field(lambda: env.max_turns),
            "turn": _field(lambda: env.turn),
            "done": _field(lambda: env.done),
            "seed": _field(lambda: env.seed_value),
        }
        if params:
            out["params"] = _field(lambda: dict(env.params))
        return {"sync": out}

    def handle(self, op: str, eid: int, args: list[Any]) -> dict[str, Any]:
        """Run one operation; returns the answer's body (``value`` plus what the proxy mirrors)."""
        if op == "init":
            return self._init(*args)
        if op == "prepare":  # e.g. import an installed suite once, under the import deadline and the audit
            _import(str(args[0]))(*self.args)
            return {}
        if op == "make":
            if self.factory is None:
                raise RuntimeError("the env host was not initialized")
            from gymverse.global_rng import GlobalRngSnapshot

            # every env is built from the checker's sentinel state, so `rng_changed` can tell what it touched
            sentinel = GlobalRngSnapshot.sentinel()
            env = self.factory(*self.args, complexity=int(args[0]))
            new = self._register(env)
            self.sentinels[new] = sentinel
            return {"env": new, **self._describe(env)}
        env = self.envs[eid]
        if op == "reset":
            return {"value": encode(env.reset(seed=args[0])), **self._sync(env, params=True)}
        if op == "step":
            return {"value": encode(env.step(args[0])), **self._sync(env)}
        if op == "solve":
            return {"value": encode(env.solve())}
        if op == "sample":
            return {"value": encode(env.sample_random_action())}
        if op == "set_complexity":
            env.set_complexity(args[0])
            return self._sync(env)
        if op == "get_state":
            handle, self.next_id = self.next_id, self.next_id + 1
            self.states[handle] = (eid, env.get_state())
            return {"value": handle}
        if op == "set_state":
            _owner, state = self.states[int(args[0])]
            env.set_state(state)
            return self._sync(env, params=True)
        if op == "clone":
            twin = env.clone()
            if twin is env:
                return {"env": eid, **self._describe(env)}
            return {"env": self._register(twin), **self._describe(twin)}
        if op == "resets":
            return {"value": self._resets(env, *args)}
        if op == "plays":
            return self._plays(env, *args)
        if op == "play":
            return self._play(env, *args)
        if op == "record":
            from gymverse.sandbox._recording import record

            target = self.recordable.get(args[0]) if isinstance(args[0], str) else None
            if target is None:
                raise ValueError(f"not a recordable check: {args[0]!r}")
            return {"value": record(env, target, args[1]), **self._sync(env, params=True)}
        if op == "lockstep":
            return {"value": _lockstep(env, self.envs[int(args[0])], args[1], args[2]), **self._sync(env, params=True)}
        if op == "instance_state":
            from gymverse.conformance import BASE_ATTRS, canon

            return {"value": encode(canon({k: v for k, v in vars(env).items() if k not in BASE_ATTRS}))}
        if op == "gem_attrs":
            inner = env.gem_env
            scalars = {k: v for k, v in vars(inner).items() if isinstance(v, int | float | str | bool)}
            return {"value": encode(scalars)}
        if op == "rng_changed":
            before = self.sentinels.get(eid)
            return {"value": before.changed() if before is not None else []}
        raise ValueError(f"unknown env host operation {op!r}")

    def _resets(self, env: Any, seeds: list[Any], look: Any, timeout: Any = None) -> list[Any]:
        """`_reset_one` per seed, each under `timeout` (enforced here only to save time on honest slow envs); the
        first that hangs is ``["hang", message]`` and ends the list."""
        from gymverse.deadline import CallTimeout, deadline

        out: list[Any] = []
        for i, seed in enumerate(seeds):
            try:
                with deadline(float(timeout) if timeout else None, f"reset(seed={seed})"):
                    out.append(self._reset_one(env, seed, i < int(look)))
            except CallTimeout as err:
                out.append(["hang", str(err)])
                break
        return out

    @staticmethod
    def _reset_one(env: Any, seed: Any, look: bool) -> list[Any]:
        """``["ok"]``, with `look` ``["ok", first observation, the GEM object's scalars or None]``; or the error."""
        try:
            if not look:
                env.reset(seed=seed)
                return ["ok"]
            obs, _ = env.reset(seed=seed)
            inner = getattr(env, "gem_env", None)
            scalars = None
            if inner is not None:
                scalars = {k: v for k, v in vars(inner).items() if isinstance(v, int | float | str | bool)}
            return ["ok", str(obs), encode(scalars)]
        except Exception as err:
            return ["err", type(err).__name__, str(err)[:500]]

    def _init(
        self, factory: str, args: list[Any], files: dict[str, str], recordable: list[list[str]] | None = None
    ) -> dict[str, Any]:
        """Take the session's factory and the checks it may record (``[name, "module:function"]`` pairs, from
        `gymverse.sandbox.host_registrations`) and write its files into the work dir (a warm host gets them only
        now)."""
        if self.factory is not None:
            raise RuntimeError("the env host is already initialized")
        self.recordable = {str(name): str(target) for name, target in recordable or []}
        for name, text in files.items():
            path = os.path.normpath(name)
            if os.path.isabs(path) or path.split(os.sep)[0] == os.pardir:
                raise ValueError(f"file name {name!r} escapes the work dir")
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        importlib.invalidate_caches()  # files that appeared after start-up must be importable
        self.factory, self.args = _import(factory), list(args)
        return {}

    def _plays(self, env: Any, episodes: list[Any], timeout: Any) -> dict[str, Any]:
        """Several episodes from ``reset(seed)`` in one request, each under `timeout` (enforced here only to save
        time on honest slow envs; the trusted side bounds the whole request itself). After a timeout the rest
        are not played: ``None``."""
        from gymverse.deadline import CallTimeout, deadline

        out: list[Any] = []
        timed_out = False
        for seed, policy, action, limit in episodes:
            if timed_out:
                out.append(None)
                continue
            try:
                with deadline(float(timeout) if timeout else None, f"episode (seed {seed})"):
                    out.append(self._episode(env, seed, True, policy, action, limit))
            except CallTimeout as err:
                timed_out = True
                out.append({"reset": None, "steps": [], "error": ["CallTimeout", str(err), ""]})
        return {"value": out, **self._sync(env, params=True)}

    def _play(self, env: Any, seed: Any, reset: bool, policy: str, action: Any, limit: Any) -> dict[str, Any]:
        """One episode in one request (`_episode`)."""
        return {"value": self._episode(env, seed, reset, policy, action, limit), **self._sync(env, params=reset)}

    @staticmethod
    def _episode(env: Any, seed: Any, reset: bool, policy: str, action: Any, limit: Any) -> dict[str, Any]:
        """A whole episode in one request: (reset,) then act with `policy` until it ends, an error, or `limit`.

        Policies: ``random`` (its sample_random_action), ``oracle`` (its solve), ``constant`` (`action`, or its
        first random action), ``mixed`` (`action` spells each turn's choice, ``r`` random or ``o`` oracle: a noisy
        oracle's coin flips, drawn on the trusted side; the episode stops where they end). Returns the transcript
        and the exception that stopped it; the trusted side judges it (the env chose or received every action, so
        this reveals nothing it could not have answered call by call)."""
        from gymverse.conformance import step_type_problem
        from gymverse.play import play, scripted

        out: dict[str, Any] = {"reset": None, "steps": [], "error": None}
        steps: list[Any] = []
        try:
            if reset:  # here, not in `play`: the limit below is read after reset, and an unencodable reset stops it
                out["reset"] = encode(env.reset(seed=seed))
            cap = int(limit) if limit is not None else int(env.max_turns) + 1
            if policy == "mixed":  # the noisy oracle's coins are spent: the episode stops where they end
                cap = min(cap, len(str(action)))

            def keep(_obs: Any, act: str, res: Any) -> None:  # encoded as it happens: it ends where encoding fails
                steps.append([act, encode(res)])

            chooser = scripted(policy, action)
            err = play(env, chooser, reset=False, max_steps=cap, judge=step_type_problem, on_step=keep).error
        except Exception as bad:
            err = bad
        if err is not None:
            tb = "".join(traceback.format_exception(type(err), err, err.__traceback__, limit=-6))[-4000:]
            out["error"] = [type(err).__name__, str(err)[:2000], tb]
        out["steps"] = steps
        return out

    def drop(self, ids: list[Any]) -> None:
        """Close and forget envs the trusted side closed or no longer references (and their state snapshots)."""
        gone = {i for i in ids if isinstance(i, int)}
        for eid in gone:
            env = self.envs.pop(eid, None)
            if env is not None and not any(other is env for other in self.envs.values()):
                with contextlib.suppress(Exception):
                    env.close()
            self.sentinels.pop(eid, None)
        for handle in [h for h, (owner, _) in self.states.items() if owner in gone]:
            del self.states[handle]


def _lockstep(a: Any, b: Any, seed: Any, max_steps: Any) -> dict[str, Any]:
    """The calls `gymverse.checker.checks.check_determinism` makes on two fresh envs, in its order, in one request:
    ``{"calls": [[env "a"/"b", op, value], ...], "error": [type, message, traceback] or None}``. The trusted side
    replays the check against this record (`gymverse.checker._replay`): it judges every value itself and asks for
    the live calls when the record ends short of what it needs. Only env calls end it with an ``error``."""
    from gymverse.conformance import step_limit
    from gymverse.sandbox._recording import Log

    log = Log()
    with contextlib.suppress(Exception):  # an env call raised, or our own bookkeeping on odd values: it ends there
        log.call("a", "reset", lambda: a.reset(seed=seed))
        log.call("b", "reset", lambda: b.reset(seed=seed))
        limit = max_steps if max_steps is not None else step_limit(a, None)
        for _ in range(int(limit)):
            act = log.call("a", "sample", a.sample_random_action)
            if log.call("b", "sample", b.sample_random_action) != act or not isinstance(act, str):
                return {"calls": log.calls, "error": log.error}
            ra = log.call("a", "step", functools.partial(a.step, act))
            rb = log.call("b", "step", functools.partial(b.step, act))
            if ra[2] or ra[3] or rb[2] or rb[3]:
                break
        log.call("a", "reset", lambda: a.reset(seed=seed))
    return {"calls": log.calls, "error": log.error}


def _metadata(env: Any) -> Any:
    md = env.metadata
    to_dict = getattr(md, "to_dict", None)
    from gymverse.core import EnvMetadata

    if isinstance(md, EnvMetadata) and callable(to_dict):
        return {"EnvMetadata": {**to_dict(), "reward_range": md.reward_range}}
    return {"other": md}


def _answer(host: Host, msg: dict[str, Any], audit: _audit.Recorder | None = None) -> bytes:
    seq = msg.get("id")
    host.drop(list(msg.get("drop") or []))
    op = str(msg.get("op"))
    try:
        if audit is not None:
            audit.active = op != "init"  # init writes the shipped files: our doing, not the env's
        body = host.handle(op, int(msg.get("env") or 0), list(msg.get("args") or []))
        answer = {"id": seq, "ok": True, **body}
    except BaseException as err:  # the env's exception (even SystemExit) is an answer, not the end of the host
        if isinstance(err, KeyboardInterrupt):
            raise
        tb = "".join(traceback.format_exception(type(err), err, err.__traceback__, limit=-6))[-4000:]
        answer = {"id": seq, "ok": False, "type": type(err).__name__, "message": str(err)[:2000], "traceback": tb}
    if audit is not None:
        audit.active = False
        attempts = audit.drain()
        if attempts:  # what env code tried outside its box during this request (`gymverse.sandbox._audit`)
            answer["audit"] = attempts
    try:
        data = _protocol.frame(answer)
    except (TypeError, ValueError, RecursionError) as err:  # e.g. an int too long to print
        why = f"the answer could not be encoded: {type(err).__name__}: {err}"[:500]
        data = _protocol.frame({"id": seq, "ok": False, "type": "EnvHostError", "message": why})
    if len(data) > _protocol.RESULT_CAP:
        why = f"the answer ({len(data)} bytes) exceeds the {_protocol.RESULT_CAP}-byte limit"
        data = _protocol.frame({"id": seq, "ok": False, "type": "EnvHostError", "message": why})
    return data


#: Imported before the first request whatever is installed (the launcher passes these and what packages register:
#: `gymverse.sandbox.host_registrations.host_preload`).
PRELOAD = ("numpy", "gymverse", "gymverse.loader")


def serve(preload: list[str] | None = None) -> None:
    """Answer requests on stdin until it closes. The first one (``init``) names the factory envs are built with,
    as ``factory(*args, complexity=level)``, and the files to write into the work dir."""
    requests, answers = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the env's prints go to stderr, never into the answer channel
    os.close(devnull)
    for name in PRELOAD if preload is None else preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    audit = _audit.install(os.getcwd())
    host = Host()
    while True:
        header = _read_exact(requests, _protocol.FRAME_HEADER.size)
        if header is None:
            return
        (size,) = _protocol.FRAME_HEADER.unpack(header)
        body = _read_exact(requests, size) if size <= REQUEST_CAP else None
        msg = _protocol.parse(body) if body is not None else None
        if msg is None:
            return
        data = _answer(host, msg, audit)
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        _write_all(answers, data)


__all__ = ["EXTRA_ATTRS", "Host", "serve"]
