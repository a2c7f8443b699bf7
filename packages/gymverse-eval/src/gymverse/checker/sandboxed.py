"""`check_in_sandbox`: check an env *file* hosted in a sandbox, with the checker in this process.

An env file is untrusted code: it runs in a `gymverse.sandbox.hosted.EnvHost` (its own unprivileged user, no
network, a private working directory holding only a copy of the file, resource limits), never as the caller, and
the checker drives it from here, so the file can neither rewrite the checks nor forge their report. Every call
into the env has a deadline (`check_timeout`): a reset that loops forever costs that long and is reported with
the check, level and seed it hung in; `timeout` bounds the whole run. GymVerse env files and GEM-style files
(``from gem.core import Env``; success and complexity by their conventions, `gymverse.compat.gem_conventions`)
are both accepted.
"""

from __future__ import annotations

import re
from pathlib import Path

from gymverse.checker.report import CheckReport, CheckResult
from gymverse.checker.runner import check_env
from gymverse.deadline import CallTimeout, deadline
from gymverse.loader import split_spec

HOST_FACTORY = "gymverse.loader:build_from_ref"
_GEM_IMPORT = re.compile(r"^\s*(from\s+gem[\s.]|import\s+gem\b)", re.M)


def file_ref(name: str, text: str, class_name: str | None) -> str:
    """The `build_from_ref` reference of an env file: ``gem:`` when it imports gem, else ``file:``."""
    kind = "gem" if _GEM_IMPORT.search(text) else "file"
    return f"{kind}:{name}" + (f":{class_name}" if class_name else "")


def check_in_sandbox(
    spec: str,
    *,
    levels: tuple[int, ...] = (1, 5, 10),
    seeds: tuple[int, ...] = (0, 1, 2),
    max_steps: int | None = None,
    check_timeout: float = 10.0,
    timeout: float = 300.0,
    memory_mb: int = 2048,
) -> CheckReport:
    """Check the env file ``path.py[:Class]`` hosted in a sandbox; a crash, hang or limit becomes a failed result."""
    from gymverse.sandbox import SandboxLimits
    from gymverse.sandbox.hosted import EnvHost

    where, class_name = split_spec(spec)
    path = Path(where)
    text = path.read_text(encoding="utf-8")
    limits = SandboxLimits(timeout=timeout + 5.0, memory_mb=memory_mb)  # the deadline below ends the run first
    host = EnvHost(HOST_FACTORY, [file_ref(path.name, text, class_name)], files={path.name: text}, limits=limits,
                   call_timeout=check_timeout)  # fmt: skip
    here = re.compile(r"/[^\s'\"]*?/" + re.escape(path.name))  # the sandbox's copy -> the user's file
    last: list[CheckResult] = []
    meta = {"levels": list(levels), "seeds": list(seeds)}
    try:
        with deadline(timeout, "the sandboxed check"):
            report = check_env(host.make, levels=levels, seeds=seeds, max_steps=max_steps,
                               on_result=lambda r: last.__setitem__(slice(None), [r]))  # fmt: skip
    except CallTimeout as err:
        report = CheckReport(spec, meta=meta)
        if "the sandboxed check" in str(err):
            report.results.append(CheckResult("sandbox", False, f"sandbox timeout: {err}"[:500]))
        else:
            after = f"the check after {last[0].name} ({last[0].where or 'global'})" if last else "the first check"
            report.results.append(CheckResult("timeout", False, f"the env hung in {after}: {err}"))
    finally:
        host.close()
    report.target = spec
    for r in report.results:
        r.reason = here.sub(str(path), r.reason)
    report.meta["sandbox"] = list(host.result.isolation) if host.result is not None else []
    return report


__all__ = ["check_in_sandbox", "file_ref"]
