"""``gymverse view``: index trajectory JSONL files and serve the viewer page, or export it as one HTML file."""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import time
from collections.abc import Callable
from typing import IO

from gymverse.command_line import Parser, UsageError

DEFAULT_PORT = 8765
#: An exported page filters in the browser: fine at 10k episodes (benchmarks/viewer.py), sluggish far beyond.
EXPORT_WARN_EPISODES = 50_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``gymverse view``."""
    p.add_argument("paths", metavar="PATH", nargs="+", help="trajectory .jsonl files or run directories (searched)")
    p.add_argument("--port", "-p", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--export", metavar="OUT.html", help="write one self-contained HTML file instead of serving")


def _progress(err: IO[str]) -> tuple[Callable[[int, int, int, str], None], Callable[[int, int], None]]:
    last = [0.0]

    def on_load(done: int, total: int, episodes: int, path: str) -> None:
        now = time.monotonic()
        if path and now - last[0] < 1.0 and done < total:
            return
        last[0] = now
        where = f"  {path}" if path else ""
        print(f"indexing: {done}/{total} files, {episodes:,} episodes{where}", file=err, flush=True)

    def on_export(done: int, total: int) -> None:
        print(f"exporting: {done:,}/{total:,} episodes", file=err, flush=True)

    return on_load, on_export


def cmd_view(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """Run ``gymverse view``; returns the exit code (serving returns 0 after Ctrl-C)."""
    from gymverse.viewer import TrajectoryFileError, TrajectoryIndex, ViewerServer, export_html

    on_load, on_export = _progress(err)
    try:
        index = TrajectoryIndex(args.paths, progress=on_load)
    except (TrajectoryFileError, OSError) as exc:
        raise UsageError(str(exc)) from None
    print(f"indexed {len(index):,} episodes from {len(index.files)} file(s) in {index.load_seconds:.1f}s", file=err)
    if index.n_problems:
        print(f"warning: skipped {index.n_problems} bad line(s); first: {index.problems[0]}", file=err)
    if args.export:
        if len(index) > EXPORT_WARN_EPISODES:
            print(f"warning: exporting all {len(index):,} episodes into one page; browsers get slow past "
                  f"{EXPORT_WARN_EPISODES:,} (serve large runs with `gymverse view` instead)", file=err)  # fmt: skip
        path = export_html(index, args.export, progress=on_export)
        size = path.stat().st_size / 1e6
        print(f"wrote {path} ({size:.1f} MB, {len(index):,} episodes)", file=out)
        return 0
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    try:
        server = ViewerServer(index, args.host, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {args.port} is in use; choose another with --port N (0 picks a free one)") from None
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}: anyone who can reach it can read these trajectories", file=err)
    print(f"serving {len(index):,} episodes at {server.url}  (Ctrl-C to stop)", file=out, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        # A terminal's Ctrl-C reaches `uv run` too, which forwards it: a second SIGINT must not cut the shutdown.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("stopped", file=err)
    finally:
        server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gymverse.cli.view``: the same command on its own."""
    parser = Parser(prog="gymverse view", description="Browse trajectory JSONL files in a local web page.")
    add_arguments(parser)
    try:
        return cmd_view(parser.parse_args(argv), sys.stdout, sys.stderr)
    except UsageError as exc:
        print(f"gymverse view: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["DEFAULT_PORT", "add_arguments", "cmd_view"]
