"""Job side of a sandboxed job: drop into the job's limits and uid, run the source or callable, hand the value over.

Runs in the job process the monitor forked. The value pipe is the only channel to the monitor: one JSON message
(``{"value", "value_repr"}`` or ``{"error"}``), then the exit code tells the monitor what happened (`EXIT_OK`,
`EXIT_ERROR`, `EXIT_MEMORY`, `EXIT_SETUP`). The monitor trusts the exit, never a status the job claims.
"""

from __future__ import annotations

import _ast
import _signal
import contextlib
import importlib
import json
import os
import signal
import sys
import traceback

from gymverse.sandbox import _isolation, _protocol, _seccomp

# Not `typing.TYPE_CHECKING`: importing typing would load it into every zygote, and every job's fork copies
# and every job's exit tears down what a zygote holds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Prefix of a freshly exec'd launcher's or zygote's command line (argv[1]: the gymverse package dir). Stub
#: `gymverse` and `gymverse.sandbox` packages let it load only the modules it needs: the real `__init__`s import
#: numpy and dataclasses, which would triple every start-up (and enlarge every fork of a zygote).
STUBS = (
    "import sys, types\n"
    "for name, sub in (('gymverse', ''), ('gymverse.sandbox', '/sandbox')):\n"
    "    m = types.ModuleType(name); m.__path__ = [sys.argv[1] + sub]; sys.modules[name] = m\n"
)
#: The environment untrusted code sees: nothing inherited from the parent except what the caller passes.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
REPR_LIMIT = 2000
EXIT_OK, EXIT_ERROR, EXIT_MEMORY, EXIT_SETUP = 0, 1, 3, 70


def drop_stubs() -> None:
    """Forget the bootstrap's stub packages so user code importing gymverse gets the real ones from `sys.path`."""
    for name in ("gymverse.sandbox", "gymverse"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None) is None:
            del sys.modules[name]


def _run_source(source: str) -> Any:
    # Like a notebook cell: if the last statement is an expression, its value is the job's return value.
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    if "\n" not in source.strip():
        # One line, maybe a lone expression: then this is the same compilation without building a Python AST
        # (which touches, in a forked job, pages that each cost a copy). Anything else takes the general path.
        try:
            code = compile(source, "<sandbox>", "eval")
        except SyntaxError:
            pass
        else:
            return eval(code, scope)
    tree = compile(source, "<sandbox>", "exec", _ast.PyCF_ONLY_AST)  # `ast.parse`, without loading `ast`
    assert isinstance(tree, _ast.Module)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body[-1].value)
        tree.body.pop()
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


def _outcome(spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    try:
        if spec["mode"] == "source":
            value = _run_source(spec["source"])
        else:
            value = _run_callable(spec["target"], spec.get("args", []), spec.get("kwargs", {}))
    except SystemExit as exc:
        code = exc.code
        if code in (None, 0):
            return EXIT_OK, {"value": None}
        return EXIT_ERROR, {"error": f"SystemExit: {code}"}
    except MemoryError:
        return EXIT_MEMORY, {"error": "MemoryError: address-space limit reached"}
    except BaseException as exc:
        traceback.print_exc()
        return EXIT_ERROR, {"error": f"{type(exc).__name__}: {exc}"[:REPR_LIMIT]}
    out: dict[str, Any] = {"value": None}
    if value is not None:
        out["value_repr"] = repr(value)[:REPR_LIMIT]
        try:
            json.dumps(value)
            out["value"] = value
        except (TypeError, ValueError, RecursionError) as exc:
            if spec["mode"] == "callable":
                return EXIT_ERROR, {"error": f"return value is not JSON-serializable: {exc}"}
    return EXIT_OK, out


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


def confine(spec: dict[str, Any], inherited: list[str], death_signal: bool = True) -> list[str]:
    """Last steps before untrusted code: session, work dir, rlimits, uid, death signal (unless not
    `death_signal`), no-new-privs (unless `inherited`), the seccomp filter (`_seccomp`); returns the measures
    applied."""
    applied = ["session"]
    with contextlib.suppress(OSError):
        os.setsid()
    linux = sys.platform.startswith("linux")
    os.chdir(spec["workdir"])
    uid = spec.get("uid")
    _isolation.set_limits(spec["limits"], uid)
    applied.append("rlimits")
    if uid is not None:
        _isolation.drop_privileges(int(uid))
        applied.append(f"uid:{uid}")
    if linux and death_signal:
        # A uid switch clears the parent-death signal: re-arm it so the job dies with its monitor.
        _isolation.prctl(_isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    if linux and "no-new-privs" not in inherited:
        _isolation.prctl(_isolation.PR_SET_NO_NEW_PRIVS, 1)
        applied.append("no-new-privs")
    bpf = _seccomp.program() if linux and spec.get("seccomp", True) else None
    if bpf is not None:  # last: from here on no namespace, io_uring, keyring, ptrace, BPF or mount call works
        _seccomp.install(bpf)
        applied.append("seccomp")
    return applied


def run_job(
    spec: dict[str, Any],
    value_fd: int,
    applied: list[str] | None = None,
    *,
    measure_rss: bool = True,
    death_signal: bool = True,
    clean_env: bool = False,
) -> None:
    """Confine this process as `spec` asks, run the job, hand its value over on `value_fd` and exit.

    The first message on `value_fd` lists the measures applied (`applied`, those already in force, then
    confinement's; sent before any untrusted code runs, so it is known even if the job is killed); the second is
    the outcome (with the job's peak RSS when `measure_rss`). `death_signal`: re-arm the parent-death signal
    after the uid switch (not needed in a PID namespace whose init is the job's parent). `clean_env`: the
    environment is `BASE_ENV` already (a zygote's), only the job's own variables are added.
    """
    code = EXIT_SETUP
    try:
        applied = [*(applied or []), *confine(spec, applied or [], death_signal)]
        _protocol.send(value_fd, {"applied": applied})
        sys.path[:] = spec["sys_path"]
        sys.path.insert(0, spec["workdir"])  # like a script's own dir: `files` written there are importable
        if not clean_env:
            os.environ.clear()
            os.environ.update(BASE_ENV)
        os.environ.update({"HOME": spec["workdir"], "TMPDIR": spec["workdir"], **spec.get("env", {})})
        os.umask(0o077)
        # A file-size overrun then fails the write with an exception instead of killing the job.
        _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)  # not `signal.signal`: its enum wrapping costs pages
        code, outcome = _outcome(spec)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if measure_rss:
            outcome["peak_rss_kb"] = _peak_rss_kb()
        try:
            _protocol.send(value_fd, outcome)
        except (TypeError, ValueError, RecursionError) as exc:
            code = EXIT_ERROR
            _protocol.send(value_fd, {"error": f"return value could not be sent: {exc}"[:REPR_LIMIT]})
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException as exc:  # confinement itself failed: never run the code unconfined
        code = EXIT_SETUP
        with contextlib.suppress(Exception):
            _protocol.send(value_fd, {"error": f"sandbox setup failed: {type(exc).__name__}: {exc}"})
    finally:
        os._exit(code)
