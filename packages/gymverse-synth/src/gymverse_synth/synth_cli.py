"""``gymverse synth``: run the synthesis pipeline, and ``gymverse synth evolve ENV_DIR``: synthesize a harder variant.

Registered into the core CLI through the ``gymverse.cli`` entry-point group (``register``). Exit codes: 0 the run
completed (whatever was accepted), 1 some seeds ended in an error a rerun resumes (e.g. the model was unreachable),
2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from gymverse.command_line import positive_int_arg as _positive
from gymverse.text import plural

from gymverse_synth.spec import CORE_DOMAINS, DOMAINS, normalize_domain


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _domain(text: str) -> str:
    value = normalize_domain(text)
    if value not in DOMAINS:
        raise argparse.ArgumentTypeError(f"unknown domain {text!r}; expected one of {', '.join(DOMAINS)}")
    return str(value)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a success rate in [0, 1], got {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", metavar="URL|local", help="OpenAI-compatible base URL, 'local' or 'replay:FILE' (required)")
    p.add_argument("--model", default=None, help="model name sent to an OpenAI-compatible endpoint")
    p.add_argument("--max-repairs", type=_non_negative, default=2, help="repair rounds per env (default 2)")
    p.add_argument("--max-tokens", type=_positive, default=None, help="completion token budget per request")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--timeout", type=float, default=120.0, help="sandbox wall-clock limit per validation (s)")
    p.add_argument("--memory-mb", type=_positive, default=1024, help="sandbox memory limit per validation (MB)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--construction",
        choices=("auto", "whole", "parts", "sketch"),
        default="auto",
        help="program in one request (whole), method by method (parts) or as a one-answer task's typed slots "
        "(sketch); auto: sketch with --llm local, else whole",
    )
    p.add_argument(
        "--structured",
        choices=("auto", "on", "off"),
        default="auto",
        help="response_format JSON schemas to a server: auto (off once it refuses one), on, off",
    )


def register(subparsers: Any) -> None:
    """Entry point of the ``gymverse.cli`` group: add ``synth`` (and ``synth evolve``) to the core CLI."""
    usage = (
        "gymverse synth (--domain DOMAIN [--n N] | --seeds FILE) --llm URL|local [options]\n"
        "       gymverse synth evolve ENV_DIR --success RATE --llm URL|local [options]"
    )
    p = subparsers.add_parser(
        "synth",
        help="synthesize environments with an LLM (abstraction → code → validation)",
        usage=usage,
        description="Synthesize environments from seeds. `evolve` is an optional subcommand, not a required one.",
    )
    domain_help = f"seed from the built-in envs of a domain ({', '.join(CORE_DOMAINS.values())}; any case)"
    src = p.add_mutually_exclusive_group()
    src.add_argument("--seeds", metavar="FILE", help="JSONL file of seeds ({'domain', 'idea', ...} per line)")
    src.add_argument("--domain", type=_domain, help=domain_help)
    p.add_argument("--n", type=_positive, default=4, help="number of seeds with --domain (default 4)")
    p.add_argument("--out", default="gymverse-synth", help="run directory (default ./gymverse-synth); reruns resume")
    p.add_argument("--concurrency", type=_positive, default=4, help="seeds in flight (default 4)")
    p.add_argument("--family", default="synth", help="registry family of the accepted envs (default synth)")
    _add_common(p)
    p.set_defaults(handler=run_command)
    sub = p.add_subparsers(dest="synth_command", metavar="evolve", title="optional subcommand", required=False)
    e = sub.add_parser("evolve", help="synthesize a harder variant of an accepted env")
    e.add_argument("env_dir", metavar="ENV_DIR", help="artifact directory of an accepted env")
    e.add_argument("--success", type=_rate, required=True, help="measured success at its top level, in [0, 1]")
    e.add_argument("--name", default=None, help="class name of the variant (default <Name>V2)")
    _add_common(e)
    e.set_defaults(handler=evolve_command)


def domain_seeds(domain: str, n: int, specs: Sequence[Any] | None = None) -> list[Any]:
    """`n` seeds varying the registered envs of `domain` (cycled, each cycle asking for another variation)."""
    from gymverse.registry import list_specs

    from gymverse_synth.seeds import Seed, seed_from_builtin

    core = CORE_DOMAINS.get(normalize_domain(domain), domain.lower())  # any spelling: Tool-use, tool use, tooluse
    specs = list_specs() if specs is None else specs
    ids = [s.id for s in specs if getattr(getattr(s.load(), "metadata", None), "domain", None) == core]
    if not ids:
        raise ValueError(f"no built-in env of domain {domain!r} to seed from; pass --seeds FILE")
    seeds = []
    for k in range(n):
        base = seed_from_builtin(ids[k % len(ids)], domain=domain)
        if k >= len(ids):  # a distinct idea (and so a distinct seed id and stage directory) per cycle
            base = Seed(domain=base.domain, idea=f"{base.idea} (variation {k // len(ids) + 1})", kind="builtin",
                        payload=base.payload)  # fmt: skip
        seeds.append(base)
    return seeds


def _client(args: argparse.Namespace) -> Any:
    from gymverse_synth.llm import get_client

    if not args.llm:
        raise ValueError("--llm is required: an OpenAI-compatible base URL, 'local' or 'replay:FILE'")
    if args.llm.startswith(("http://", "https://")):
        return get_client(args.llm, model=args.model, structured=args.structured)
    return get_client(args.llm, model=args.model)


def _config(args: argparse.Namespace, out: Path, **extra: Any) -> Any:
    from gymverse_synth.pipeline import SynthConfig
    from gymverse_synth.validation import ValidationConfig

    sampling = {k: v for k, v in (("max_tokens", args.max_tokens), ("temperature", args.temperature)) if v is not None}
    validation = ValidationConfig(timeout=args.timeout, memory_mb=args.memory_mb)
    construction: Literal["whole", "parts", "sketch"] = "sketch" if args.llm == "local" else "whole"
    if args.construction in ("whole", "parts", "sketch"):
        construction = args.construction
    return SynthConfig(out=out, max_repairs=args.max_repairs, sampling=sampling, validation=validation,
                       construction=construction, **extra)  # fmt: skip


def run_command(args: argparse.Namespace) -> int:
    """``gymverse synth``: run the pipeline over the seeds, print and save the summary."""
    from rich.console import Console

    from gymverse_synth.artifacts import register_suite
    from gymverse_synth.pipeline import run_pipeline
    from gymverse_synth.seeds import load_seeds_jsonl
    from gymverse_synth.synth_summary import failure_lines, summary_table

    try:
        if args.seeds:
            seeds = load_seeds_jsonl(args.seeds)
        elif args.domain:
            seeds = domain_seeds(args.domain, args.n)
        else:
            raise ValueError("give --seeds FILE or --domain D (with --n N)")
        if not seeds:
            raise ValueError(f"{args.seeds}: no seeds in the file")
        config = _config(args, Path(args.out), concurrency=args.concurrency)
        client = _client(args)
    except (OSError, ValueError, ImportError) as err:
        print(f"gymverse synth: error: {err}", file=sys.stderr)
        return 2
    summary = run_pipeline(seeds, client, config, progress=not args.no_progress)
    console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 140, highlight=False)
    console.print(summary_table(summary))
    for line in failure_lines(summary):
        console.print(line, markup=False, soft_wrap=True)
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    ids = register_suite(config.suite, family=args.family)
    console.print(f"suite: {config.suite} ({plural(len(ids), 'accepted env')}); summary: {config.out / 'summary.json'}")
    return 1 if summary.errors else 0


def evolve_command(args: argparse.Namespace) -> int:
    """``gymverse synth evolve ENV_DIR``: synthesize and validate a harder variant into the same suite."""
    from rich.console import Console

    from gymverse_synth.evolve import evolve

    env_dir = Path(args.env_dir)
    try:
        config = _config(args, env_dir.resolve().parent / ".evolve", suite_dir=env_dir.resolve().parent)
        client = _client(args)
        outcome = evolve(env_dir, client, args.success, config=config, new_name=args.name)
    except (OSError, ValueError, ImportError) as err:
        print(f"gymverse synth evolve: error: {err}", file=sys.stderr)
        return 2
    console = Console()
    if outcome.status == "accepted":
        rounds = plural(outcome.repair_rounds, "repair round")
        console.print(f"accepted: {config.suite / str(outcome.artifact)} ({rounds})")
        return 0
    console.print(f"{outcome.status} at {outcome.stage}: {outcome.reason}")
    return 1 if outcome.status == "error" else 0


__all__ = ["domain_seeds", "evolve_command", "register", "run_command"]
