"""What env code tried to do outside its box, recorded by a CPython audit hook in the env host.

The sandbox contains an env silently (a denied ``open`` is just an ``OSError`` the env may swallow), but adapters
run envs in training without that sandbox, so evaluation must *see* the attempt. `install` adds an audit hook (it
cannot be removed) and wraps ``os.environ`` reads; an event counts only while env code is on the stack (a frame
whose file lies in the work dir, where the env's files are written), so the host's own imports and bookkeeping
never count. Env code shares the process and could tamper with the record list: this is evidence, not a barrier
(the sandbox stays the barrier); its attempts before any tampering are still recorded.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: Kinds of attempt, in the words evaluation reports.
KINDS = ("read_file", "write_file", "read_environ", "socket", "spawn", "native_code")
MAX_RECORDS = 20
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_QUIET_DEVICES = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")
_SPAWN = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
)
_SOCKET = ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo", "socket.__new__")
_NATIVE = ("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function")
_MUTATE = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.chmod", "shutil.rmtree")


class Recorder:
    """The attempts of env code, in order, deduplicated and capped; `drain` hands over the new ones."""

    def __init__(self, workdir: str) -> None:
        self.workdir = os.path.realpath(workdir)
        self.roots = tuple({self.workdir, os.path.abspath(workdir)})
        self.trusted = tuple(
            sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path[1:]) if p})
        )
        self.records: list[list[str]] = []
        self.new: list[list[str]] = []
        self.seen: set[tuple[str, str]] = set()
        self.active = False
        self.busy = False

    def _env_on_stack(self) -> bool:
        frame: Any = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(self.roots) or not name.startswith(("<", "/")):  # relative: from the work dir
                return True
            frame = frame.f_back
        return False

    def _inside(self, path: str) -> bool:
        return path == self.workdir or path.startswith(self.workdir + os.sep)

    def add(self, kind: str, detail: str) -> None:
        """Record one attempt (each kind and detail once)."""
        key = (kind, detail[:300])
        if key in self.seen or len(self.records) >= MAX_RECORDS:
            return
        self.seen.add(key)
        self.records.append(list(key))
        self.new.append(list(key))

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook: classify `event` and record it when env code caused it."""
        if not self.active or self.busy:
            return
        kind, detail = _classify(event, args)
        if kind is None:
            return
        self.busy = True  # the checks below may themselves raise audit events
        try:
            if kind in ("read_file", "write_file"):
                path = os.path.realpath(os.path.join(os.getcwd(), detail))
                if self._inside(path) or path in _QUIET_DEVICES:
                    return
                if kind == "read_file" and (path.startswith(self.trusted) or path.startswith("/proc/self/fd")):
                    return  # imports and the interpreter's own files
                detail = path
            if self._env_on_stack():
                self.add(kind, detail)
        finally:
            self.busy = False

    def environ_read(self, key: object) -> None:
        """Called by the wrapped ``os.environ``."""
        if self.active and not self.busy:
            self.busy = True
            try:
                if self._env_on_stack():
                    self.add("read_environ", str(key))
            finally:
                self.busy = False

    def drain(self) -> list[list[str]]:
        """The attempts recorded since the last call."""
        out, self.new = self.new, []
        return out


def _classify(event: str, args: tuple[Any, ...]) -> tuple[str | None, str]:
    if event == "open":
        path, mode, flags = [*args, None, None, None][:3]
        if not isinstance(path, str | bytes):
            return None, ""
        text = os.fsdecode(path)
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        return ("write_file" if writes else "read_file"), text
    if event in _MUTATE and args and isinstance(args[0], str | bytes):
        return "write_file", os.fsdecode(args[0])
    if event in _SOCKET:
        return "socket", f"{event} {_short(args[1:] if event != 'socket.getaddrinfo' else args[:2])}"
    if event.startswith(_SPAWN):
        return "spawn", f"{event} {_short(args[:2])}"
    if event in _NATIVE:
        return "native_code", f"{event} {_short(args[:1])}"
    if event in ("os.putenv", "os.unsetenv"):
        return "read_environ", f"{event} {_short(args[:1])}"
    return None, ""


def _short(value: object, limit: int = 160) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def install(workdir: str) -> Recorder:
    """Add the audit hook and the ``os.environ`` wrapper for env code that runs in `workdir`."""
    rec = Recorder(workdir)
    sys.addaudithook(rec.hook)
    cls = type(os.environ)
    get, it = cls.__getitem__, cls.__iter__

    def getitem(self: Any, key: Any) -> Any:
        rec.environ_read(key)
        return get(self, key)

    def iterate(self: Any) -> Any:
        rec.environ_read("<all variables>")
        return it(self)

    cls.__getitem__ = getitem  # type: ignore[method-assign]
    cls.__iter__ = iterate  # type: ignore[method-assign]
    return rec


__all__ = ["KINDS", "MAX_RECORDS", "Recorder", "install"]
