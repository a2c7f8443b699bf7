"""``gymverse serve``: run the environment server (`gymverse.server`) in the foreground until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Any

from gymverse import registry
from gymverse.command_line import UsageError, positive_int_arg


def positive_float_arg(text: str) -> float:
    """argparse type: positive seconds."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected positive seconds, got {text!r}")
    return value


def add_serve_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """The ``serve`` subcommand's arguments."""
    p = sub.add_parser("serve", help="serve environments over HTTP (gymverse-server)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--envs",
        default=None,
        help="comma-separated ids or families to serve (default: all registered; remote+ ids only when listed)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it registers more envs); repeatable",
    )
    p.add_argument(
        "--workers",
        type=positive_int_arg,
        default=None,
        help="threads running blocking env calls (sessions live in this one process; not uvicorn processes)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="bearer token required on every route but /health (default: $GYMVERSE_TOKEN, else none)",
    )
    p.add_argument("--max-sessions", type=positive_int_arg, default=4096, help="open sessions limit (default 4096)")
    p.add_argument("--idle-timeout", type=positive_float_arg, default=600.0, help="close sessions idle this long (s)")
    p.add_argument(
        "--step-timeout", type=positive_float_arg, default=30.0, help="end an episode whose env call hangs (s)"
    )
    p.add_argument("--max-action-bytes", type=positive_int_arg, default=64 * 1024, help="largest action (bytes)")
    p.add_argument("--agentgym", metavar="ID", default=None, help="serve ID on AgentGym's root routes (/create, ...)")
    p.add_argument(
        "--agentgym-dialect",
        choices=("id", "env_idx"),
        default="id",
        help="AgentGym answer shapes: 'id' (TextCraft, BabyAI, ...) or 'env_idx' (WebShop)",
    )
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))


def cmd_serve(args: argparse.Namespace) -> int:
    """Validate the settings, then serve until interrupted."""
    try:
        from gymverse.server import ServerConfig, serve
        from gymverse.server.app import create_app  # noqa: F401 - fail here, not in uvicorn, without fastapi
    except ImportError as err:
        raise UsageError(
            f"'gymverse serve' needs the gymverse-server package: pip install gymverse-server ({err})"
        ) from None
    for module in args.imports:
        try:
            importlib.import_module(module)
        except Exception as err:
            raise UsageError(f"--import {module}: {type(err).__name__}: {err}") from None
    envs = tuple(e.strip() for e in args.envs.split(",") if e.strip()) if args.envs else None
    # Taken out of the environment: a served remote+ env would otherwise send it to the server it proxies.
    env_token = os.environ.pop("GYMVERSE_TOKEN", None)
    token = args.token if args.token is not None else env_token or None
    try:
        config = ServerConfig(
            envs=envs,
            max_sessions=args.max_sessions,
            idle_timeout=args.idle_timeout,
            step_timeout=args.step_timeout,
            max_action_bytes=args.max_action_bytes,
            workers=args.workers,
            token=token,
            agentgym=args.agentgym,
            agentgym_dialect=args.agentgym_dialect,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    try:
        config.check_registry()
    except ValueError as err:  # its message starts with the field, "envs: ..." or "agentgym: ...": the flag's name
        raise UsageError(f"--{err}") from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if token is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"gymverse serve: warning: {args.host} is reachable from other machines and no --token is set; "
            "anyone who can connect can open sessions",
            file=sys.stderr,
        )
    from gymverse.server.runner import PortInUse, bind

    try:
        sock = bind(args.host, args.port)
    except PortInUse as err:
        print(f"gymverse serve: {err.strerror}; pick another --port (0 picks a free one)", file=sys.stderr)
        return 1
    served = sum(config.serves(e) for e in registry.list_envs())
    auth = "bearer token required" if token else "no token"
    where = f"http://{args.host}:{sock.getsockname()[1]}"
    print(
        f"gymverse serve: {served} envs on {where} ({auth}; sessions idle {args.idle_timeout:g} s are closed); "
        f"{where}/ lists them",
        file=sys.stderr,
        flush=True,
    )
    # uvicorn catches Ctrl-C, shuts down cleanly, restores the handler found here and re-raises the signal; a second
    # Ctrl-C (`uv run` forwards the terminal's) can land after that. Stopping was asked for: both end quietly, exit 0.
    # Python's own finalization resets a Python-level handler to the default, which a forwarded Ctrl-C landing
    # then turns into death by SIGINT (exit 130 from `uv run`); SIG_IGN it keeps.
    signal.signal(signal.SIGINT, lambda *_: None)
    try:
        serve(config, log_level=args.log_level, sock=sock)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return 0
