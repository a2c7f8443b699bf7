"""`_HostConnection`: one env host process, the two pipes to it and the one-request-one-answer discipline.

Every answer is untrusted data: it must come after a request, carry that request's id, fit the size and depth caps
and parse; anything else kills the host and raises `EnvHostError` naming the violation. A call past its time (or
the active `gymverse.deadline.deadline`) kills the host and raises `EnvHostTimeout`.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import Any

from gymverse import deadline as _deadline
from gymverse.sandbox import _protocol
from gymverse.sandbox._audit import MAX_RECORDS
from gymverse.sandbox._host_errors import EnvCallError, EnvHostError, EnvHostTimeout, remote_error
from gymverse.sandbox._host_launch import HostProcess, start_host
from gymverse.sandbox.config import SandboxResult
from gymverse.sandbox.host_registrations import host_preload
from gymverse.sandbox.runner import build_spec

SERVE = "gymverse.sandbox.env_host:serve"
#: Extra time the first call of a host gets: the interpreter starts and imports the env's dependencies.
STARTUP_GRACE = 20.0
#: How long a dying host gets to report how it ended before we give up waiting for the status.
DEATH_WAIT = 3.0
#: How long a closed host gets to exit on its own before it is killed.
GRACEFUL_EXIT = 2.0


def short(value: Any, limit: int = 40) -> str:
    """`value`'s repr, cut to `limit` characters (for messages that may quote env data)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _HostConnection:
    """One env host process: the pipes to it, its supervisor thread, and the request/answer discipline."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        limits, readable_paths, backend, forked = key
        self.key = key
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        preload = list(host_preload())
        spec = build_spec("callable", target=SERVE, args=[preload], limits=limits, readable_paths=readable_paths)
        try:
            self.job: HostProcess = start_host(spec, limits, readable_paths, backend, forked, (req_r, ans_w))
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
        self.result = self.job.wait()

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
            raise self._violation(f"its answer to {what} carries id {short(msg.get('id'))}, not {self.seq}")
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
            self.job.kill()

    def close(self) -> None:
        """End the host: close its request pipe (it exits on its own), kill it if it lingers, release the pipes."""
        if self.dead is None and self.thread.is_alive():
            os.close(self.req)
            self.req = -1
            self.thread.join(GRACEFUL_EXIT)
        self.kill("closed")
        self.thread.join(10.0)
        for fd in (self.req, self.ans):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.req = self.ans = -1
        self.job.release()


#: This thread's warm spare host (see `EnvHost` ``prestart``): per thread, because a host dies with the thread
#: that started it.
spares = threading.local()


def release_spare() -> None:
    """Stop this thread's warm spare host, if any."""
    spare: _HostConnection | None = getattr(spares, "spare", None)
    spares.spare = None
    if spare is not None:
        spare.close()


__all__ = ["DEATH_WAIT", "GRACEFUL_EXIT", "SERVE", "STARTUP_GRACE", "release_spare", "short", "spares"]
