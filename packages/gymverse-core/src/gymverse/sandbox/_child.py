"""Child side of a sandboxed job: isolate, then run the source or callable, then report on the result fd.

The result fd carries JSON lines: first ``{"isolation": [...]}`` as soon as isolation is in force (so the parent
knows it even if the job is later killed), then one final ``{"status": ..., ...}`` line.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import signal
import sys
import traceback
from typing import Any

from gymverse.sandbox._isolation import isolate

#: The environment untrusted code sees: nothing inherited from the parent except what the caller passes.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
REPR_LIMIT = 2000


def drop_stubs() -> None:
    """Forget the bootstrap's stub packages so user code importing gymverse gets the real ones from `sys.path`."""
    for name in ("gymverse.sandbox", "gymverse"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None) is None:
            del sys.modules[name]


def _send(fd: int, payload: dict[str, Any]) -> None:
    data = (json.dumps(payload) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _run_source(source: str) -> Any:
    # Like a notebook cell: if the last statement is an expression, its value is the job's return value.
    tree = ast.parse(source, filename="<sandbox>")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(tree, "<sandbox>", "exec"), scope)
    return None if last is None else eval(compile(last, "<sandbox>", "eval"), scope)


def _run_callable(target: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"callable target must look like 'package.module:function', got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target!r} is not callable (got {type(obj).__name__})")
    return obj(*args, **kwargs)


def _outcome(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        if spec["mode"] == "source":
            value = _run_source(spec["source"])
        else:
            value = _run_callable(spec["target"], spec.get("args", []), spec.get("kwargs", {}))
    except SystemExit as exc:
        code = exc.code
        if code in (None, 0):
            return {"status": "ok", "return_value": None}
        return {"status": "error", "error": f"SystemExit: {code}"}
    except MemoryError:
        return {"status": "memory", "error": "MemoryError: address-space limit reached"}
    except BaseException as exc:
        traceback.print_exc()
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:REPR_LIMIT]}
    out: dict[str, Any] = {"status": "ok", "return_value": None}
    if value is not None:
        out["value_repr"] = repr(value)[:REPR_LIMIT]
        try:
            json.dumps(value)
            out["return_value"] = value
        except (TypeError, ValueError) as exc:
            if spec["mode"] == "callable":
                return {"status": "error", "error": f"return value is not JSON-serializable: {exc}"}
    return out


def _peak_rss_kb() -> int | None:
    # Not getrusage: after posix_spawn (vfork + exec) Linux seeds ru_maxrss with the *parent's* high-water mark.
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError, MemoryError):  # a job at its memory limit may not manage the read
        pass
    return None


def run_job(spec: dict[str, Any], result_fd: int) -> None:
    """Isolate this process as `spec` asks, run the job, report on `result_fd` and exit (never returns)."""
    code = 0
    try:
        sys.path[:] = spec["sys_path"]
        applied = isolate(spec)
        sys.path.insert(0, spec["workdir"])  # like a script's own dir: `files` written there are importable
        os.environ.clear()
        os.environ.update(BASE_ENV)
        os.environ.update({"HOME": spec["workdir"], "TMPDIR": spec["workdir"]})
        os.environ.update(spec.get("env", {}))
        os.umask(0o077)
        # A file-size overrun then fails the write with an exception instead of killing the job.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _send(result_fd, {"isolation": applied})
        outcome = _outcome(spec)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        outcome["peak_rss_kb"] = _peak_rss_kb()
        _send(result_fd, outcome)
    except BaseException as exc:  # isolation itself failed: never run the code unconfined
        code = 70
        with contextlib.suppress(OSError):
            _send(result_fd, {"status": "error", "error": f"sandbox setup failed: {type(exc).__name__}: {exc}"})
    finally:
        os._exit(code)


def main(spec_fd: int, result_fd: int) -> None:
    """Entry point of a freshly exec'd child: read the spec from `spec_fd`, then `run_job`."""
    chunks = []
    while chunk := os.read(spec_fd, 1 << 16):
        chunks.append(chunk)
    os.close(spec_fd)
    drop_stubs()
    run_job(json.loads(b"".join(chunks)), result_fd)
