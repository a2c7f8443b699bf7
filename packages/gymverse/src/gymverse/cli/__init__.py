"""The `gymverse` command: ``list`` the registered envs, ``play`` one, ``check`` envs, ``view`` trajectories,
``serve`` envs over HTTP.

Exit codes: 0 success, 1 a check failed, 2 bad usage (unknown id, bad complexity or seed, unloadable file).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO, Any

from gymverse.command_line import (
    Parser,
    UsageError,
    complexity_arg,
    levels_arg,
    positive_int_arg,
    seconds_arg,
    seed_arg,
    seeds_arg,
)
from rich.console import Console

#: Subcommands that other GymVerse packages add (entry-point group ``gymverse.cli``), with the package to install.
PLUGIN_COMMANDS = {"evaluate": "gymverse-eval", "synth": "gymverse-synth", "train": "gymverse-train"}


def missing_command_hint(command: str) -> str:
    """The one line printed for a GymVerse subcommand whose package is not installed."""
    package = PLUGIN_COMMANDS[command]
    return (
        f"gymverse: '{command}' comes with the {package} package, which is not installed: "
        f"pip install {package} (or `pip install gymverse` for every command)"
    )


class _Parser(Parser):
    """The `gymverse` parser: remembers which known subcommands' packages are missing."""

    #: PLUGIN_COMMANDS whose package is missing (or failed to load), filled by `build_parser`.
    missing_commands: tuple[str, ...] = ()


def build_parser() -> _Parser:
    """The argument parser of the `gymverse` command."""
    from gymverse import __version__

    parser = _Parser(prog="gymverse", description="Text environments for LLM agents.")
    parser.add_argument("--version", action="version", version=f"gymverse {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p_list = sub.add_parser("list", help="show the registered environments")
    p_list.add_argument("--family", help="only this family (the part of the id before ':')")

    p_play = sub.add_parser("play", help="play an environment from the terminal (or piped stdin)")
    p_play.add_argument("env_id", metavar="ID", help="registered id such as game:GuessTheNumber")
    p_play.add_argument("--complexity", "-c", type=complexity_arg, default=1, help="level 1..10 (default 1)")
    p_play.add_argument(
        "--seed", "-s", type=seed_arg, default=None, help="episode seed (default: random at a terminal, 0 when piped)"
    )

    p_check = sub.add_parser("check", help="run the env checker; exit code 1 when a check fails")
    p_check.add_argument("env_ids", metavar="ID", nargs="*", help="registered ids to check")
    p_check.add_argument("--builtin", action="store_true", help="check every built-in env of gymverse-core")
    p_check.add_argument(
        "--all", action="store_true", help="check every registered env (installed suites too: can take long)"
    )
    p_check.add_argument("--path", action="append", default=[], metavar="FILE", help="env file 'path.py[:Class]'")
    p_check.add_argument("--levels", type=levels_arg, default=(1, 5, 10), help="complexity levels (default 1,5,10)")
    p_check.add_argument("--seeds", type=seeds_arg, default=(0, 1, 2), help="seeds (default 0,1,2)")
    p_check.add_argument("--max-steps", type=positive_int_arg, default=None, help="step guard per episode")
    p_check.add_argument("--json", metavar="OUT", help="also write the reports as JSON to OUT")
    p_check.add_argument("--verbose", "-v", action="store_true", help="one row per check, passing ones too")
    own = "run --path files in this process, as you (default: an isolated, limited sandbox)"
    p_check.add_argument("--no-sandbox", action="store_true", help=own)
    p_check.add_argument("--check-timeout", type=seconds_arg, default=10.0,
                         help="seconds each check of a --path file may take (default 10)")  # fmt: skip
    p_check.add_argument("--timeout", type=seconds_arg, default=300.0,
                         help="seconds for all checks of one --path file (default 300)")  # fmt: skip

    from gymverse.cli.view import add_arguments as add_view_arguments

    add_view_arguments(sub.add_parser("view", help="browse trajectory JSONL files in a local web page"))
    from gymverse.cli.serve import add_serve_parser

    add_serve_parser(sub)
    _add_plugin_commands(sub)
    # Known commands of packages that are not installed still show in --help; `main` answers them with a hint.
    parser.missing_commands = tuple(name for name in PLUGIN_COMMANDS if name not in sub.choices)
    for name in parser.missing_commands:
        sub.add_parser(name, help=f"(not installed: pip install {PLUGIN_COMMANDS[name]})", add_help=False)
    return parser


def _add_plugin_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Subcommands from installed packages: entry points in group ``gymverse.cli``, each ``register(subparsers)``.

    A plugin's `register` adds its parser and sets a ``handler(args) -> int`` default. Plugins are imported here,
    not at module level, so core never depends on them; a broken plugin is reported and skipped.
    """
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="gymverse.cli"), key=lambda e: e.name):
        if ep.name in sub.choices:
            continue
        try:
            ep.load()(sub)
        except Exception as err:
            print(f"gymverse: ignoring command plugin {ep.name!r}: {type(err).__name__}: {err}", file=sys.stderr)


def _console(file: IO[str]) -> Console:
    # Piped output would otherwise be squeezed to 80 columns, wrapping every table cell.
    width = None if file.isatty() or "COLUMNS" in os.environ else 140
    return Console(file=file, width=width, highlight=False, soft_wrap=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gymverse` command; returns the exit code."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((word for word in words if not word.startswith("-")), None)
    if command is not None and command in parser.missing_commands:
        print(missing_command_hint(command), file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and usage errors
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
    out = _console(sys.stdout)
    # Imported here so `gymverse --version` stays fast and commands can import UsageError from this module.
    from gymverse.cli.commands import cmd_check, cmd_list, cmd_play

    handler = getattr(args, "handler", None)
    try:
        if handler is not None:  # a plugin subcommand (see _add_plugin_commands)
            return int(handler(args))
        if args.command == "list":
            return cmd_list(args.family, out)
        if args.command == "play":
            return cmd_play(args.env_id, args.complexity, args.seed, out, sys.stdin)
        if args.command == "view":
            from gymverse.cli.view import cmd_view

            return cmd_view(args, sys.stdout, sys.stderr)
        if args.command == "serve":
            from gymverse.cli.serve import cmd_serve

            return cmd_serve(args)
        return cmd_check(args, out, _console(sys.stderr))
    except UsageError as err:
        print(f"gymverse {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


__all__ = [
    "PLUGIN_COMMANDS",
    "UsageError",
    "build_parser",
    "complexity_arg",
    "levels_arg",
    "main",
    "missing_command_hint",
    "positive_int_arg",
    "seconds_arg",
    "seed_arg",
    "seeds_arg",
]
