"""Implementations of ``gymverse list``, ``gymverse play`` and ``gymverse check``."""

from __future__ import annotations

import argparse
import json
import secrets
from pathlib import Path
from typing import IO, Any

from gymverse import registry
from gymverse.checker import CHECK_NAMES, CheckReport, CheckResult, CheckTargetError, check_env
from gymverse.checker.runner import EPISODE_CHECKS, GLOBAL_CHECKS
from gymverse.checker.sandboxed import check_in_sandbox
from gymverse.checker.target import Target, resolve_target
from gymverse.command_line import UsageError
from gymverse.core import Env
from gymverse.loader import split_spec
from gymverse.progress import JobProgress
from gymverse.protocol import EnvLike
from gymverse.text import plural
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text


# ------------------------------------------------------------------------------------------------------------ list
def format_params(cls: type[Env]) -> str:
    """Complexity params as ``name v1→v10`` joined by commas (the turn budget has its own column)."""
    spec = cls.complexity_spec()
    table = spec.table()
    return ", ".join(f"{n} {table[1][n]}→{table[10][n]}" for n in spec.params if n != "max_turns") or "-"


def format_turn_budget(cls: type[Env]) -> str:
    """The turn budget stated once: ``12``, or ``10→8`` when it is a complexity param."""
    spec = cls.complexity_spec()
    if "max_turns" not in spec.params:
        return str(cls.metadata.max_turns)
    table = spec.table()
    return f"{table[1]['max_turns']}→{table[10]['max_turns']}"


def cmd_list(family: str | None, out: Console) -> int:
    """Print a table of the registered envs."""
    ids = registry.list_envs(family)
    if family is not None and not ids:
        families = sorted({i.split(":", 1)[0] for i in registry.list_envs()})
        hint = registry.did_you_mean(family, families)
        raise UsageError(f"unknown family {family!r}{hint} (known families: {', '.join(families)})")
    table = Table(title=f"GymVerse environments ({len(ids)})", show_lines=False)
    for col in ("id", "domain", "description", "max_turns", "complexity params (level 1→10)"):
        table.add_column(col, overflow="fold")
    for env_id in ids:
        try:
            cls = registry.env_class(env_id)
            md = cls.metadata
            table.add_row(env_id, md.domain, md.description, format_turn_budget(cls), format_params(cls))
        except Exception as err:  # one broken plugin must not hide the rest of the list
            table.add_row(env_id, "?", Text(f"cannot load: {type(err).__name__}: {err}", style="red"), "?", "?")
    out.print(table)
    return 0


# ------------------------------------------------------------------------------------------------------------ play
PLAY_HELP = "commands: ':oracle' lets the oracle move, ':help' shows this, ':quit' ends the session"
HUMAN_HELP = (
    r"type the move alone (it is wrapped in \boxed{} for you); a move the env cannot parse is explained and costs "
    "no turn"
)


def human_action(text: str, action_format: str) -> str:
    r"""A person's typed move as the env expects it: wrapped in ``\boxed{}`` when the env's format asks for it and
    the person did not type it (the env itself is unchanged)."""
    if action_format.lstrip().startswith("\\boxed{") and "\\boxed{" not in text:
        return "\\boxed{" + text.strip() + "}"
    return text


def _format_error_on_copy(env: EnvLike, action: str) -> str | None:
    """The env's format-error message for `action`, found by stepping a copy (None: well formed, or the env
    cannot be copied, e.g. a remote one, and the move is simply played)."""
    try:
        probe = env.clone()
    except Exception:
        return None
    try:
        res = probe.step(action)
    except Exception:  # the real step reports it
        return None
    finally:
        probe.close()
    return str(res.info.get("error_message") or res.observation) if res.info.get("format_error") else None


def cmd_play(env_id: str, complexity: int, seed: int | None, out: Console, stdin: IO[str]) -> int:
    """Play one episode reading actions line by line from `stdin`; stops at ':quit' or end of input.

    At a terminal (a person playing) moves are wrapped in the env's ``\\boxed{}`` when left out, a move the env
    cannot parse is explained without spending a turn, and the default seed is a fresh random one (printed, so the
    game can be replayed with ``--seed``). Piped input is played exactly as given, with seed 0 by default."""
    try:
        env = registry.make(env_id, complexity=complexity)
    except registry.RegistryError as err:
        raise UsageError(str(err)) from None
    human = stdin.isatty()
    if seed is None:
        seed = secrets.randbelow(2**31) if human else 0
    with env:
        obs, _ = env.reset(seed=seed)
        md = env.metadata
        out.print(Text(f"{env_id}  complexity={complexity}  seed={seed}  max_turns={env.max_turns}", style="bold"))
        out.print(Text(f"action format: {md.action_format}   ({PLAY_HELP})", style="dim"))
        if human:
            out.print(Text(HUMAN_HELP, style="dim"))
        out.print(Panel(Text(obs), title="observation"))
        total = 0.0
        while True:
            if human:
                out.print(f"[bold]turn {env.turn + 1}>[/bold] ", end="")
            line = stdin.readline()
            if not line:
                turns = plural(env.turn, "turn")
                out.print(Text(f"end of input after {turns}; episode not finished (return {total:+.2f})"))
                return 0
            action = line.rstrip("\r\n")
            command = action.strip()
            if command == ":quit":
                out.print(Text(f"quit after {plural(env.turn, 'turn')} (return {total:+.2f})"))
                return 0
            if command == ":help":
                out.print(Text(PLAY_HELP + ("\n" + HUMAN_HELP if human else "")))
                continue
            if command == ":oracle":
                action = env.solve()
                out.print(Text(f"oracle plays: {action}", style="cyan"))
            elif human:
                if not command:
                    continue
                action = human_action(action, md.action_format)
                problem = _format_error_on_copy(env, action)
                if problem is not None:
                    out.print(Text(f"not played: {problem}", style="yellow"))
                    continue
                if action != line.rstrip("\r\n"):
                    out.print(Text(f"plays: {action}", style="cyan"))
            else:
                out.print(Text(f"> {action}", style="cyan"))
            res = env.step(action)
            total += res.reward
            flag = "  (format error)" if res.info.get("format_error") else ""
            out.print(Text(f"reward {res.reward:+.2f}{flag}", style="yellow" if flag else "green"))
            out.print(Panel(Text(res.observation), title=f"turn {env.turn}"))
            if res.done:
                ended = "terminated" if res.terminated else "truncated"
                if res.info.get("success") is True:
                    out.print(Text(f"SUCCESS in {plural(env.turn, 'turn')} (return {total:+.2f})", style="bold green"))
                else:
                    turns = plural(env.turn, "turn")
                    out.print(Text(f"FAIL: episode {ended} after {turns} (return {total:+.2f})", style="red"))
                if human:
                    out.print(Text(f"replay this game: gymverse play {env_id} -c {complexity} --seed {seed}"))
                return 0


# ----------------------------------------------------------------------------------------------------------- check
def _targets(args: argparse.Namespace) -> list[Target]:
    specs: list[str] = list(args.env_ids)
    if args.all or args.builtin:
        ids = registry.list_envs() if args.all else registry.builtin_ids()
        specs += [i for i in ids if i not in specs]
    if not specs and not args.path:
        raise UsageError("name env ids to check, or use --builtin, --all or --path FILE")
    targets = []
    for spec in specs:
        try:
            targets.append(resolve_target(spec))
        except CheckTargetError as err:
            raise UsageError(str(err)) from None
    for spec in args.path:
        if args.no_sandbox:
            try:
                targets.append(resolve_target(spec))
            except CheckTargetError as err:
                raise UsageError(str(err)) from None
            continue
        where, _ = split_spec(spec)  # untrusted: only checked to exist here, executed in the sandbox
        if not Path(where).is_file():
            raise UsageError(f"{where}: no such file")
        targets.append(Target(spec, _not_here))
    return targets


def _not_here(level: int) -> Env:
    raise RuntimeError("sandboxed --path targets are built inside the sandbox only")


def checks_per_target(n_levels: int, n_seeds: int) -> int:
    """How many results `check_env` produces for one target."""
    return len(GLOBAL_CHECKS) + len(EPISODE_CHECKS) * n_levels * n_seeds + n_seeds + 1


def _reason_cell(results: list[CheckResult]) -> Text:
    failed = [r for r in results if not r.passed]
    if not failed:
        return Text(results[0].reason if len(results) == 1 else "", style="dim")
    first = failed[0]
    where = f"[{first.where}] " if first.where else ""
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    return Text(f"{where}{first.reason}{more}", style="red")


def render_reports(reports: list[CheckReport], out: Console, verbose: bool = False) -> None:
    """One table: a row per env when everything passed, else a row per failing check with its first reason."""
    table = Table(title="gymverse check", show_lines=True)
    table.add_column("env", overflow="fold")
    table.add_column("check")
    table.add_column("result", justify="right")
    table.add_column("reason (first failure)", overflow="fold")
    for rep in reports:
        names = [n for n in CHECK_NAMES if rep.by_name(n)]
        shown = names if verbose else rep.failed_names()
        if not shown:
            n = len(rep.results)
            table.add_row(rep.target, "all", Text(f"✓ {n}/{n}", style="green"), "")
            continue
        for i, name in enumerate(shown):
            results = rep.by_name(name)
            n_ok = sum(r.passed for r in results)
            mark = Text(f"✓ {n_ok}/{len(results)}", style="green")
            if n_ok < len(results):
                mark = Text(f"✗ {len(results) - n_ok}/{len(results)} failed", style="red")
            table.add_row(rep.target if i == 0 else "", name, mark, _reason_cell(results))
    out.print(table)
    n_pass = sum(r.passed for r in reports)
    style = "bold green" if n_pass == len(reports) else "bold red"
    out.print(Text(f"{n_pass}/{len(reports)} environments passed every check", style=style))


def reports_json(reports: list[CheckReport]) -> dict[str, Any]:
    """The JSON document written by ``--json``."""
    return {"passed": all(r.passed for r in reports), "reports": [r.to_dict() for r in reports]}


def cmd_check(args: argparse.Namespace, out: Console, err_console: Console) -> int:
    """Run the checker over the requested targets, print the table, optionally write JSON."""
    targets = _targets(args)
    per_target = checks_per_target(len(set(args.levels)), len(args.seeds))
    reports: list[CheckReport] = []
    with JobProgress("check", per_target * len(targets), console=err_console) as progress:
        for tgt in targets:
            progress.update(description=f"checking {tgt.label}")
            if tgt.build is _not_here:
                report = check_in_sandbox(
                    tgt.label,
                    levels=args.levels,
                    seeds=args.seeds,
                    max_steps=args.max_steps,
                    check_timeout=args.check_timeout,
                    timeout=args.timeout,
                )
                progress.update(advance=per_target)
                reports.append(report)
                continue
            report = check_env(
                tgt.label,  # resolved above only to fail fast on a bad spec
                levels=args.levels,
                seeds=args.seeds,
                max_steps=args.max_steps,
                on_result=lambda _r: progress.update(advance=1),
            )
            reports.append(report)
    render_reports(reports, out, verbose=args.verbose)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(reports_json(reports), indent=2) + "\n")
        out.print(Text(f"wrote {path}", style="dim"))
    return 0 if all(r.passed for r in reports) else 1
