"""How an env host process starts and is watched: a fresh launcher per host, or a fork of a warm zygote.

A fresh launch (`FreshHost`, `gymverse.sandbox.runner.launch`) starts an interpreter per host, which then imports
what envs need: about half a second of CPU before the first request, paid once per env file checked. A forked host
(`ForkedHost`) is a job of a `gymverse.sandbox.pool.Zygote` that has imported those modules once: the job process
is forked ahead of time, gets the host's request and answer pipes as its stdin and stdout, and is confined exactly
like a `SandboxPool` job (own uid, IPC and mount namespaces, a PID namespace shared only with its zygote,
seccomp, rlimits, a private work dir); when the host ends, its zygote kills whatever the job left behind before it
reports. One zygote serves one host at a time; `ZYGOTES` keeps the idle ones for the next host.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from gymverse.sandbox import _supervise
from gymverse.sandbox.config import SandboxLimits, SandboxResult
from gymverse.sandbox.host_registrations import host_preload
from gymverse.sandbox.pool import Zygote
from gymverse.sandbox.runner import Backend, finish, isolation_support, launch


class HostProcess(Protocol):
    """A started env host process, as its `gymverse.sandbox._host_connection._HostConnection` sees it."""

    #: When it started (`time.monotonic`): its wall-clock budget counts from here.
    start: float

    def wait(self) -> SandboxResult:
        """Watch it to its end (the connection's supervisor thread) and say how it ended."""
        ...

    def kill(self) -> None:
        """Stop it now, with everything it started (idempotent; nothing once it has ended)."""
        ...

    def release(self) -> None:
        """Free what watching it held, once `wait` has returned."""
        ...


class FreshHost:
    """A host in a freshly exec'd launcher (under bubblewrap when `backend` allows)."""

    def __init__(self, spec: dict[str, Any], backend: Backend, stdio: tuple[int, int]) -> None:
        self.job = launch(spec, None, backend, stdio=stdio)
        self.start = self.job.start
        self.pidfd = os.dup(self.job.pidfd)  # ours to signal: `finish` closes the original

    def wait(self) -> SandboxResult:
        """The launcher's result, once it exited."""
        return finish(self.job)

    def kill(self) -> None:
        """SIGKILL the launcher: its PID namespace, and so the whole job, goes with it."""
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def release(self) -> None:
        """Close our pidfd."""
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
        self.pidfd = -1


class Zygotes:
    """Idle host zygotes by (readable paths, network); a host takes one (or starts one) and gives it back."""

    def __init__(self) -> None:
        self._idle: dict[tuple[Any, ...], list[Zygote]] = {}
        self._lock = threading.Lock()
        support = isolation_support()
        # as in `SandboxPool`: hosts drop privileges, so mounts need a mount namespace and a uid or a user namespace
        self.mounts_ok = bool(support.get("mountns")) and (bool(support.get("uid")) or bool(support.get("userns")))

    def take(self, limits: SandboxLimits, readable_paths: Sequence[str]) -> tuple[tuple[Any, ...], Zygote]:
        """An idle zygote for these readable paths and network setting, or a new one (raises if none starts)."""
        key = (tuple(readable_paths), limits.network)
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                zygote = idle.pop()
                if zygote.alive():
                    return key, zygote
                zygote.kill()
        ahead = {"plan": _supervise.mount_plan(list(readable_paths)), "limits": limits.to_spec()}
        # what every host imports before its first request, and the host itself: imported once, here
        preload = [*host_preload(), "gymverse.sandbox.env_host"]
        return key, Zygote(preload, limits.network, ahead if self.mounts_ok else None)

    def give(self, key: tuple[Any, ...], zygote: Zygote) -> None:
        """Keep `zygote` for the next host when it still runs."""
        if not zygote.alive():
            zygote.kill()
            return
        with self._lock:
            self._idle.setdefault(key, []).append(zygote)

    def close(self) -> None:
        """Stop every idle zygote."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for zygotes in idle.values():
            for zygote in zygotes:
                zygote.kill()


#: This process's host zygotes (stopped at exit; a zygote also exits when our end of its socket closes).
ZYGOTES = Zygotes()
atexit.register(ZYGOTES.close)


class ForkedHost:
    """A host forked from a warm zygote of `ZYGOTES`, confined as a `SandboxPool` job."""

    def __init__(
        self, spec: dict[str, Any], limits: SandboxLimits, readable_paths: Sequence[str], stdio: tuple[int, int]
    ) -> None:
        self.spec, self.start = spec, time.monotonic()
        self.key, self.zygote = ZYGOTES.take(limits, readable_paths)
        self._lock = threading.Lock()
        self._given_back = False
        _supervise.prepare(spec, {}, ZYGOTES.mounts_ok)
        try:
            self.fds = self.zygote.launch(spec, stdio)
        except BaseException:
            self.zygote.kill()
            _supervise.cleanup(spec)
            raise

    def wait(self) -> SandboxResult:
        """What the zygote observed of the job (it kills what the job left before it reports); the zygote then
        serves the next host."""
        limits = self.spec["limits"]
        try:
            out, err, (value, status), timed_out = _supervise.supervise(
                self.fds, limits, self.start, self.zygote.kill, kill_on_error=False
            )
            result = _supervise.pool_result(value, status, timed_out, limits)
            return SandboxResult.from_dict(_supervise.finish(result, out, err, limits, self.start))
        finally:
            _supervise.cleanup(self.spec)
            with self._lock:
                self._given_back = True
                ZYGOTES.give(self.key, self.zygote)

    def kill(self) -> None:
        """Kill the zygote (the job dies with its PID namespace); never one already serving another host."""
        with self._lock:
            if not self._given_back:
                self.zygote.kill()

    def release(self) -> None:
        """Nothing: `wait` closed the pipes and gave the zygote back."""


def start_host(
    spec: dict[str, Any],
    limits: SandboxLimits,
    readable_paths: Sequence[str],
    backend: Backend,
    forked: bool,
    stdio: tuple[int, int],
) -> HostProcess:
    """A `ForkedHost` when `forked` and a zygote can serve it, else a `FreshHost` (a zygote that cannot start
    costs this host its fork, not its start)."""
    if forked:
        try:
            return ForkedHost(spec, limits, readable_paths, stdio)
        except RuntimeError:  # `Zygote` could not start (nothing of this host was set up yet)
            pass
    return FreshHost(spec, backend, stdio)


__all__ = ["ZYGOTES", "ForkedHost", "FreshHost", "HostProcess", "Zygotes", "start_host"]
