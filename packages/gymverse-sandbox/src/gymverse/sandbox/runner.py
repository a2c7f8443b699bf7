"""`Sandbox`: run Python source or an importable callable in a fresh, isolated, resource-limited process."""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gymverse.sandbox import _bwrap, _isolation, _supervise
from gymverse.sandbox.config import SandboxLimits, SandboxResult

#: How a fresh job is launched: ``auto`` (bubblewrap when installed and usable, else ctypes), or forced.
Backend = Literal["auto", "bwrap", "ctypes"]


def isolation_support() -> dict[str, bool]:
    """What this machine allows: ``uid`` (per-job unprivileged uid), ``netns``, ``mountns``, ``pidns``,
    ``ipcns``, ``userns``, and ``bwrap`` (bubblewrap installed and usable as the fresh-job launcher)."""
    support = _isolation.probe() if sys.platform.startswith("linux") else {}
    return {"uid": _isolation.is_root(), **support, "bwrap": _supervise.use_bwrap()}


def build_spec(
    mode: str,
    *,
    source: str | None = None,
    target: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    limits: SandboxLimits,
    env: Mapping[str, str] | None = None,
    drop_privileges: bool = True,
    readable_paths: Sequence[str] = (),
    seccomp: bool = True,
) -> dict[str, Any]:
    """The JSON job description a child executes (validated here so bad input fails in the caller)."""
    if mode == "source":
        if not isinstance(source, str):
            raise TypeError(f"sandbox source must be a str, got {type(source).__name__}")
    elif mode == "callable":
        if not isinstance(target, str) or ":" not in target:
            raise ValueError(f"callable target must look like 'package.module:function', got {target!r}")
    else:
        raise ValueError(f"unknown sandbox mode {mode!r}")
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"sandbox env must map str to str, got {key!r}: {value!r}")
    support = isolation_support()
    uid = _isolation.fresh_uid() if drop_privileges and support.get("uid") else None
    spec: dict[str, Any] = {
        "mode": mode,
        "source": source,
        "target": target,
        "args": list(args),
        "kwargs": dict(kwargs or {}),
        "limits": limits.to_spec(),
        "env": dict(env or {}),
        "uid": uid,
        "sys_path": [_supervise.package_root(), *(p for p in sys.path if p)],
        "readable_paths": [str(p) for p in readable_paths],
        "seccomp": bool(seccomp),
    }
    try:
        json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sandbox callable arguments must be JSON-serializable: {exc}") from exc
    return spec


def mounts_available(spec: dict[str, Any]) -> bool:
    """Whether the private-mount plan can be applied for this spec on this machine."""
    support = isolation_support()
    return bool(support.get("mountns")) and (spec["uid"] is not None or bool(support.get("userns")))


@dataclass
class Launched:
    """A fresh job that is running: its launcher and the host ends of its pipes (see `launch`)."""

    pid: int
    pidfd: int
    fds: tuple[int, int, int]
    spec: dict[str, Any]
    start: float
    bwrap: bool
    info_fd: int | None = None  # bwrap's report of its sandbox's init (`_bwrap.await_sandbox_end`)


def launch(
    spec: dict[str, Any],
    files: Mapping[str, str | bytes] | None = None,
    backend: Backend = "auto",
    stdio: tuple[int, int] | None = None,
) -> Launched:
    """Start one job spec in a freshly exec'd launcher (under bwrap when `backend` allows); `finish` collects it.

    `stdio`: the job's stdin/stdout (e.g. an env host's request and answer pipes) instead of /dev/null and capture.
    """
    start = time.monotonic()
    bwrap = backend != "ctypes" and _supervise.use_bwrap()
    if backend == "bwrap" and not bwrap:
        raise RuntimeError("Sandbox(backend='bwrap'): bubblewrap is not installed or not usable here (needs root)")
    _supervise.prepare(spec, dict(files or {}), bwrap or mounts_available(spec))
    try:
        pid, pidfd, out_r, err_r, res_r, info_fd = _supervise.spawn_exec(spec, bwrap, stdio)
    except BaseException:
        _supervise.cleanup(spec)
        raise
    return Launched(pid, pidfd, (out_r, err_r, res_r), spec, start, bwrap, info_fd)


def finish(job: Launched) -> SandboxResult:
    """Supervise a launched job to its end (deadline, output caps, kill) and return its result."""
    try:
        limits = job.spec["limits"]
        try:
            kill = functools.partial(_supervise.kill, job.pidfd, job.pid, job.spec.get("uid"), job.spec)
            out, err, (res,), timed_out = _supervise.supervise(job.fds, limits, job.start, kill, pidfd=job.pidfd)
        finally:
            os.waitpid(job.pid, 0)
            ended = job.info_fd is None or _bwrap.await_sandbox_end(job.info_fd, _supervise.KILL_GRACE)
        uid = job.spec.get("uid")
        if not ended and uid is not None:  # bwrap's init did not end in time: kill what is left of the job
            _isolation.reap_uid_until_gone(uid, settle=_supervise.KILL_GRACE)
        result = _supervise.finish(_supervise.result_from(res, timed_out, limits), out, err, limits, job.start)
        if not job.bwrap and result["isolation"]:
            result["isolation"].insert(0, "ctypes")
        return SandboxResult.from_dict(result)
    finally:
        _supervise.cleanup(job.spec)


def execute(
    spec: dict[str, Any], files: Mapping[str, str | bytes] | None = None, backend: Backend = "auto"
) -> SandboxResult:
    """Run one job spec in a freshly exec'd launcher (under bwrap when `backend` allows) to the end."""
    return finish(launch(spec, files, backend))


class _SpecRunner:
    """`run`/`call` for anything that executes job specs; subclasses set the defaults and implement `_submit`."""

    limits: SandboxLimits
    drop_privileges: bool
    readable_paths: list[str]
    seccomp: bool = True

    def _submit(self, spec: dict[str, Any], files: Mapping[str, str | bytes] | None) -> SandboxResult:
        raise NotImplementedError

    def run(
        self,
        source: str,
        *,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> SandboxResult:
        """Execute Python `source`; the value of a trailing expression becomes the return value."""
        spec = build_spec(
            "source",
            source=source,
            limits=limits or self.limits,
            env=env,
            drop_privileges=self.drop_privileges,
            readable_paths=self.readable_paths,
            seccomp=self.seccomp,
        )
        return self._submit(spec, files)

    def call(
        self,
        target: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        limits: SandboxLimits | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
    ) -> SandboxResult:
        """Call ``"package.module:function"`` with JSON arguments; its JSON result is the return value."""
        spec = build_spec(
            "callable",
            target=target,
            args=args,
            kwargs=kwargs,
            limits=limits or self.limits,
            env=env,
            drop_privileges=self.drop_privileges,
            readable_paths=self.readable_paths,
            seccomp=self.seccomp,
        )
        return self._submit(spec, files)


class Sandbox(_SpecRunner):
    """Runs untrusted Python in a fresh process per call, under `limits`.

    ``drop_privileges`` (default on) gives each job its own unprivileged uid when we run as root; this is what
    makes the process limit and the kill-everything-on-exit guarantee hold for root. ``readable_paths`` are extra
    paths the job must be able to read (the interpreter and ``sys.path`` are always made readable). ``backend``
    picks the launcher (see `Backend`); ``SandboxResult.isolation[0]`` says which one ran. ``seccomp=False``
    leaves out the seccomp filter (`gymverse.sandbox._seccomp`), e.g. for a trusted job that starts sandboxes of
    its own, which needs namespaces.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        drop_privileges: bool = True,
        readable_paths: Sequence[str] = (),
        backend: Backend = "auto",
        seccomp: bool = True,
    ) -> None:
        if backend not in ("auto", "bwrap", "ctypes"):
            raise ValueError(f"Sandbox backend must be 'auto', 'bwrap' or 'ctypes', got {backend!r}")
        self.limits = limits or SandboxLimits()
        self.drop_privileges = drop_privileges
        self.readable_paths = list(readable_paths)
        self.backend: Backend = backend
        self.seccomp = seccomp

    def _submit(self, spec: dict[str, Any], files: Mapping[str, str | bytes] | None) -> SandboxResult:
        return execute(spec, files, self.backend)
