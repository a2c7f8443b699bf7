"""The non-root code path: a sandbox started by an unprivileged caller isolates itself with a user namespace.

CI runs as root, so the test runs the caller itself inside a root-started sandbox (as a fresh unprivileged uid)
and has it start the inner sandbox and pool.
"""

from __future__ import annotations

import json
import os

import pytest
from gymverse.sandbox import Sandbox, SandboxLimits

INNER = r"""
import os, socket
out = {"uid": os.getuid()}
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    out["net"] = "connected"
except OSError as e:
    out["net"] = e.errno
n = 0
try:
    while n < 200:
        if os.fork() == 0:
            import time
            time.sleep(20)
            os._exit(0)
        n += 1
except OSError:
    pass
out["forks"] = n
open("/tmp/inner-was-here", "w").write("1")
out
"""

OUTER = r"""
import json, os
from gymverse.sandbox import Sandbox, SandboxLimits, SandboxPool, isolation_support
report = {"outer_uid": os.getuid(), "support": isolation_support()}
res = Sandbox(SandboxLimits(timeout=20, max_processes=16)).run(INNER)
report["fresh"] = [res.status, res.isolation, res.return_value]
with SandboxPool(1, SandboxLimits(timeout=20)) as pool:
    res = pool.run("import os\nos.path.exists('/tmp/inner-was-here')")
    report["pool"] = [res.status, res.isolation, res.return_value]
report["leaked"] = os.path.exists("/tmp/inner-was-here")
print(json.dumps(report))
"""


def test_unprivileged_caller_is_isolated_with_a_user_namespace() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged caller (non-root machines exercise this path directly)")
    # the outer job starts sandboxes itself: it needs the namespace calls the seccomp filter denies
    outer = Sandbox(SandboxLimits(timeout=60, max_processes=256, memory_mb=2048), seccomp=False)
    res = outer.run(f"INNER = {INNER!r}\n{OUTER}")
    assert res.status == "ok", res
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["outer_uid"] != 0
    if not report["support"]["userns"]:
        pytest.skip(f"this kernel forbids unprivileged user namespaces: {report['support']}")
    status, isolation, value = report["fresh"]
    assert status == "ok"
    assert {"userns", "netns", "private-tmp", "rlimits"} <= set(isolation)
    assert value["uid"] == report["outer_uid"]
    assert value["net"] == 101  # ENETUNREACH: only a down loopback in the new netns
    # Without a private uid the limit is granted on top of the caller's own processes, so allow those few.
    assert 1 <= value["forks"] < 16 + 8
    assert not report["leaked"]
    status, isolation, value = report["pool"]
    assert (status, value) == ("ok", False)
    assert {"userns", "netns", "private-tmp"} <= set(isolation)
