"""``gymverse evaluate``: the main job. Registered into the core CLI through the ``gymverse.cli`` entry-point group.

Also runnable as ``python -m gymverse.evaluate.cli`` with the same arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gymverse.command_line import positive_int_arg as _positive
from gymverse.command_line import seconds_arg as _seconds

DEFAULT_OUT = "gymverse-eval"
TRAJECTORIES_FILE = "trajectories.jsonl"


def _csv_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _levels(text: str) -> tuple[int, ...]:
    values = _csv_ints(text)
    bad = [v for v in values if not 1 <= v <= 10]
    if bad:
        raise argparse.ArgumentTypeError(f"levels must be in 1..10, got {bad}")
    return tuple(sorted(set(values)))


def _policies(text: str) -> tuple[str, ...]:
    from gymverse.evaluate.policies import parse_policy_spec

    try:
        return tuple(parse_policy_spec(p) for p in text.split(",") if p.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``gymverse evaluate``."""
    suite_help = "builtin (default), a family, an env id, an artifact dir, .py env file(s) or a dir of them"
    p.add_argument("suite", nargs="?", default="builtin", help=suite_help)
    policy_help = "comma-separated: random, oracle, noisy[:EPS], constant, llm (default random,oracle,noisy)"
    p.add_argument("--policy", "--policies", dest="policies", type=_policies, default=None, help=policy_help)
    p.add_argument("--epsilon", type=float, default=None, help="ε of a bare 'noisy' policy (default 0.3)")
    p.add_argument("--levels", type=_levels, default=(1, 3, 5, 7, 10), help="levels (default 1,3,5,7,10)")
    p.add_argument("--seeds", type=_positive, default=16, help="seeded episodes per level and policy (default 16)")
    p.add_argument("--k", type=_csv_ints, default=(1, 5, 10), help="pass@k values (default 1,5,10)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default ./{DEFAULT_OUT})")
    p.add_argument("--llm", metavar="URL|local", help="LLM for the llm policy and the rubric judge")
    p.add_argument("--model", default=None, help="model name sent to an OpenAI-compatible --llm endpoint")
    p.add_argument("--history", type=int, default=4, help="LLM policy history window in exchanges (default 4)")
    p.add_argument("--max-tokens", type=_positive, default=256, help="LLM reply token cap per turn (default 256)")
    p.add_argument("--max-steps", type=_positive, default=None, help="step guard per episode (default: env turns)")
    p.add_argument("--executor", choices=("sandbox", "process", "inline"), default="sandbox",
                   help="where env code runs (default sandbox: isolated, resource-limited processes)")  # fmt: skip
    p.add_argument("--workers", type=_positive, default=None, help="parallel workers (default: CPU count)")
    p.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm", help="diversity embeddings")
    p.add_argument("--no-correctness", action="store_true", help="skip the checker/oracle/degeneracy pass")
    p.add_argument("--no-diversity", action="store_true", help="skip diversity")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even when an env is incorrect (report only)")
    traj_help = f"also write every difficulty episode to OUT/{TRAJECTORIES_FILE} (browse: gymverse view OUT)"
    p.add_argument("--trajectories", action="store_true", help=traj_help)
    add_corpus_arguments(p)


def _success_rule(text: str) -> str:
    from gymverse.compat.gem_conventions import parse_success_rule

    try:
        return str(parse_success_rule(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    """Options for GEM-style corpora: which classes, the success rule, probe seeds, deadlines."""
    g = p.add_argument_group("env files (GEM-style corpora)")
    g.add_argument("--class", dest="class_name", metavar="NAME", help="evaluate class NAME in files that define it")
    g.add_argument("--all-classes", action="store_true", help="evaluate every env class of each file")
    rule_help = "success of GEM envs, e.g. 'reward>=1' or 'info' (default: inferred from the rewards)"
    g.add_argument("--success-rule", type=_success_rule, metavar="RULE", help=rule_help)
    g.add_argument("--reset-seeds", type=_positive, default=64, help="seeds per level for reset probes (default 64)")
    g.add_argument("--episode-timeout", type=_seconds, default=3.0, help="seconds per episode (default 3)")
    g.add_argument("--reset-timeout", type=_seconds, default=1.0, help="seconds per reset (default 1)")


def register(subparsers: Any) -> None:
    """Entry point of the ``gymverse.cli`` group: add the ``evaluate`` subcommand to the core CLI."""
    p = subparsers.add_parser("evaluate", help="evaluate a suite: correctness, difficulty, diversity, HTML report")
    add_arguments(p)
    p.set_defaults(handler=run)


LLM_CLIENTS_GROUP = "gymverse.llm_clients"


def llm_client(spec: str, model: str | None) -> Any:
    """The client for ``--llm SPEC``, built by the installed LLM package (entry points ``gymverse.llm_clients``)."""
    import importlib.metadata

    found = sorted(importlib.metadata.entry_points(group=LLM_CLIENTS_GROUP), key=lambda ep: ep.name)
    if not found:
        raise ValueError(
            f"--llm {spec}: no LLM client package is installed; install gymverse-synth (it provides 'local', "
            "'http(s)://...' and 'replay:PATH')"
        )
    return found[0].load()(spec, model=model)


def _config(args: argparse.Namespace) -> Any:
    from gymverse.evaluate.correctness import CorrectnessConfig
    from gymverse.evaluate.difficulty import DifficultyConfig
    from gymverse.evaluate.diversity import HashingEmbedder, default_embedder
    from gymverse.evaluate.runner import DEFAULT_POLICIES, EvaluationConfig

    policies = list(args.policies or DEFAULT_POLICIES)
    if args.epsilon is not None:
        if not 0.0 <= args.epsilon <= 1.0:
            raise ValueError(f"--epsilon must be in [0, 1], got {args.epsilon}")
        policies = [f"noisy:{args.epsilon:g}" if p == "noisy:0.3" else p for p in policies]
    client = None
    if args.llm:
        client = llm_client(args.llm, args.model)
        if "llm" not in policies:
            policies.append("llm")
    return EvaluationConfig(
        policies=tuple(policies),
        difficulty=DifficultyConfig(
            levels=args.levels, seeds=tuple(range(args.seeds)), ks=args.k, max_steps=args.max_steps
        ),
        correctness=CorrectnessConfig(
            reset_seeds=args.reset_seeds, reset_timeout=args.reset_timeout, episode_timeout=args.episode_timeout
        ),
        executor=args.executor,
        workers=args.workers,
        run_correctness=not args.no_correctness,
        run_diversity=not args.no_diversity,
        embedder=HashingEmbedder() if args.embedder == "hashing" else default_embedder(),
        llm=client,
        llm_policy_options={"history_window": args.history, "max_tokens": args.max_tokens},
        trajectories=Path(args.out) / TRAJECTORIES_FILE if args.trajectories else None,
    )


#: The exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130


def run(args: argparse.Namespace) -> int:
    """Run the evaluation described by `args`; exit code 0 all envs pass, 1 some env fails, 2 bad input."""
    from rich.console import Console

    from gymverse.evaluate.report import write_report
    from gymverse.evaluate.runner import evaluate_suite
    from gymverse.evaluate.suites import FileOptions, SuiteError, load_suite
    from gymverse.evaluate.terminal import exit_code, print_summary
    from gymverse.progress import JobProgress

    err = Console(file=sys.stderr)
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 140
    out = Console(file=sys.stdout, width=width, highlight=False)
    try:
        opts = FileOptions(args.class_name, args.all_classes, args.success_rule)
        suite = load_suite(args.suite, opts)
        cfg = _config(args)
    except (SuiteError, ValueError) as exc:
        print(f"gymverse evaluate: error: {exc}", file=sys.stderr)
        return 2
    for note in suite.skipped:
        err.print(note, highlight=False)
    start = time.perf_counter()
    with JobProgress(f"evaluate ({len(suite.entries)} envs)", None, console=err) as progress:

        def on_progress(done: int, total: int, what: str) -> None:
            progress.update(completed=done, total=total, description=what[:60])

        report = evaluate_suite(suite, cfg, progress=on_progress)
    json_path, html_path = write_report(report, args.out)
    print_summary(report, out)
    out.print(f"evaluated {len(report.envs)} envs in {time.perf_counter() - start:.1f}s ({report.run['executor']})")
    out.print(f"JSON:   {json_path}")
    out.print(f"report: {html_path.resolve()}")
    if cfg.trajectories is not None:
        out.print(f"trajectories: {cfg.trajectories}  (browse: gymverse view {args.out})")
    if report.run.get("partial"):
        out.print("interrupted (Ctrl-C): the JSON and report above hold what was done, marked partial")
        sys.stdout.flush()
        sys.stderr.flush()
        # jobs still running in worker threads would hold up a normal exit until they end: their sandboxed hosts
        # die with this process, so end it now
        os._exit(INTERRUPTED)
    return 0 if getattr(args, "no_fail", False) else exit_code(report)


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point (``python -m gymverse.evaluate.cli``)."""
    parser = argparse.ArgumentParser(prog="gymverse evaluate", description="Evaluate a GymVerse suite.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
