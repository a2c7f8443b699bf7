"""A warm pool worker: a pre-imported interpreter that runs each job in a freshly forked, isolated child.

Protocol on stdin/stdout: 4-byte big-endian length + JSON. The first message is ``{"sys_path", "preload"}``;
after that each message is a job spec (with base64 ``files``) answered by one result dict. The worker never runs
job code itself, so a job cannot poison the next one; every limit is applied to each forked child.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import json
import os
import struct
import sys
import time
from typing import IO, Any

from gymverse.sandbox import _child, _isolation, _supervise

PR_SET_CHILD_SUBREAPER = 36


def read_msg(stream: IO[bytes]) -> Any:
    """One length-prefixed JSON message, or None at EOF."""
    header = stream.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack(">I", header)
    return json.loads(stream.read(size))


def write_msg(stream: IO[bytes], payload: Any) -> None:
    """Write one length-prefixed JSON message."""
    data = json.dumps(payload).encode()
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _reap_orphans() -> None:
    # As a subreaper we inherit the job's killed descendants; collect them so no zombies pile up.
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def run_one(spec: dict[str, Any], inherited: list[str]) -> dict[str, Any]:
    """Prepare, fork, supervise and clean up one job; returns the result dict."""
    start = time.monotonic()
    files: dict[str, str | bytes] = {name: base64.b64decode(data) for name, data in spec.pop("files", {}).items()}
    spec["inherited"] = inherited
    try:
        _supervise.prepare(spec, files, mounts_ok=False)
    except (OSError, ValueError) as exc:
        return {"status": "error", "error": f"sandbox setup failed: {exc}"}
    try:
        pid, out_r, err_r, res_r = _supervise.spawn_fork(spec, _child.run_job)
        return _supervise.supervise(pid, (out_r, err_r, res_r), spec, start)
    finally:
        _supervise.cleanup(spec)
        _reap_orphans()
        if "private-tmp" in inherited:
            _isolation.wipe_temp_dirs()


def main() -> None:
    """Worker loop (entry point of the exec'd worker process)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Job children write to their own pipes; keep this process's fds 0/1 for the protocol only.
    sys.stdout = sys.stderr
    init = read_msg(stdin)
    if init is None:
        return
    sys.path[:] = init["sys_path"]
    _child.drop_stubs()
    for name in init.get("preload", []):
        importlib.import_module(name)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Namespaces are entered once here (creating them per job costs ~15 ms); jobs run one at a time, all their
    # processes are killed after each job and the private temp dirs are wiped, so nothing carries over.
    inherited = _isolation.isolate_worker(init["network"], init.get("mounts"))
    write_msg(stdout, {"ready": True, "pid": os.getpid(), "isolation": inherited})
    while (spec := read_msg(stdin)) is not None:
        write_msg(stdout, run_one(spec, inherited))
