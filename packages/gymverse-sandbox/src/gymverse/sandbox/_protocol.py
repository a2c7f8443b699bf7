"""JSON messages between the processes of a job (job -> monitor -> host), parsed defensively.

Anything read from a pipe a job could write to is untrusted: it may be truncated, enormous, nested a million
levels deep or hold fields of the wrong type. `parse` never raises on such input; it returns None.
"""

from __future__ import annotations

import _socket
import array
import json
import os
import socket
import struct

# Not `typing.TYPE_CHECKING`: no `typing` in a zygote (see `_child`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Result channel cap: a return value larger than this is reported as an error, not buffered.
RESULT_CAP = 32 * 1024 * 1024
#: Deepest nesting accepted in a message (json itself would raise RecursionError near 1000).
MAX_DEPTH = 200
#: Length prefix of a framed message (`frame`): 4 bytes, big-endian.
FRAME_HEADER = struct.Struct(">I")
#: A pool job as the host announces it to its zygote: timeout (s), uid (-1: none).
JOB_HEAD = struct.Struct("=dq")
#: What a zygote observed of a job: wait status, CPU seconds, peak RSS (kB), whether its deadline passed.
JOB_REPORT = struct.Struct("=idq?")


def send(fd: int, payload: dict[str, Any]) -> None:
    """Write one message (a JSON line) to `fd`."""
    data = (json.dumps(payload) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def frame(payload: dict[str, Any]) -> bytes:
    """One length-prefixed message: a 4-byte big-endian length, then that many bytes of compact JSON."""
    data = json.dumps(payload, separators=(",", ":")).encode()
    return FRAME_HEADER.pack(len(data)) + data


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (iterative, level by level: safe for any depth, and each level's
    children are gathered by C code rather than one Python step per value)."""
    level, items = 0, [value]
    while items:
        level += 1
        deeper: list[Any] = []
        for item in items:
            if isinstance(item, dict):
                deeper += item.values()
            elif isinstance(item, list):
                deeper += item
        items = deeper
    return level


def parse(data: bytes) -> dict[str, Any] | None:
    """The JSON object in `data`, or None if it is too big, too deep, malformed or not an object."""
    if len(data) > RESULT_CAP:
        return None
    try:
        msg = json.loads(data)
    except (ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(msg, dict) or depth(msg) > MAX_DEPTH:
        return None
    return msg


def as_int(value: Any) -> int | None:
    """`value` if it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_str(value: Any) -> str | None:
    """`value` if it is a str, else None."""
    return value if isinstance(value, str) else None


def send_fds(sock: _socket.socket, data: bytes, fds: list[int]) -> None:
    """Send `data` with `fds` attached (SCM_RIGHTS) on a Unix socket."""
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])


def recv_fds(sock: _socket.socket, nfds: int, bufsize: int = 1 << 16) -> tuple[bytes, list[int]]:
    """Receive one message (at most `bufsize` bytes: on a stream socket, exactly the bytes sent with the fds)
    and up to `nfds` attached file descriptors (empty data: the peer is gone)."""
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(bufsize, socket.CMSG_SPACE(nfds * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)
