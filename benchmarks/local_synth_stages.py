"""How far seeds get in synthesis, stage by stage, before and after issue 37 (structured output, parts).

Runs the pipeline of ``gymverse synth --domain Logic --n N`` with the offline model (``--llm local``, default) or an
OpenAI-compatible server (``--llm http://HOST:PORT/v1 --model NAME``), in two variants:

- ``before``: the program in one request (``construction="whole"``), and for a server no ``response_format`` schema
  (prompt-only design, what the HTTP client did before); the offline model always decoded the design by schema;
- ``after``: ``construction="parts"`` (method by method, each checked and repaired on its own) and, for a server, the
  design schema negotiated through ``response_format``;
- ``sketch``: ``construction="sketch"`` (a one-answer task's instance generator as typed slots, under a JSON schema;
  the default with ``--llm local``), schemas negotiated as in ``after``.

Per seed it records the furthest stage reached (``abstraction``: no design; ``construction``: a design but no
complete program; a validation stage ``static``, ``load``, ``checker``, ``degeneracy``: the program failed there;
``accepted``) and prints the funnel: how many seeds got past the design, produced a program, passed static, loaded,
reached the checker. Seeds run one at a time and the JSON is rewritten after each, so a bounded run
(``--max-seconds``) still reports. Writes ``benchmarks/results/local_synth_stages[-LABEL].json``.

    uv run python benchmarks/local_synth_stages.py --n 2 --label issue37
    uv run python benchmarks/local_synth_stages.py --llm http://127.0.0.1:8000/v1 --model smollm2 --n 2 --label vllm
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from gymverse_synth.llm import get_client
from gymverse_synth.pipeline import SynthConfig, run_pipeline
from gymverse_synth.synth_cli import domain_seeds
from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).resolve().parent / "results"
#: Stages in pipeline order; a seed that ended at one got past every stage before it.
ORDER = ("abstraction", "construction", "static", "load", "checker", "degeneracy", "accepted")
FUNNEL = {"design": "construction", "program": "static", "static passed": "load", "loaded": "checker",
          "checker passed": "degeneracy", "accepted": "accepted"}  # fmt: skip
VARIANTS: dict[str, tuple[str, Literal["whole", "parts", "sketch"]]] = {
    "before": ("off", "whole"),
    "after": ("auto", "parts"),
    "sketch": ("auto", "sketch"),
}


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _round_stage(report: dict[str, Any]) -> str:
    """The stage one round's validation report ended at (``construction`` when the round had no program)."""
    if report.get("passed"):
        return "accepted"
    if any(f.get("check") == "no_program" for f in report.get("failures", [])):
        return "construction"
    return str(report.get("stage", "construction"))


def _row(out: Path, seed_id: str, outcome: Any) -> dict[str, Any]:
    """One seed's stage, reason, design attempts and (in parts) the attempts per part."""
    seed_dir = out / seed_id
    design = Counter(a.get("error_kind") or "ok" for a in _read(seed_dir / "abstraction.json").get("attempts", []))
    parts: Counter[str] = Counter()
    for record in sorted(seed_dir.glob("*_r*.json")):
        for attempt in _read(record).get("parts", {}).get("attempts", []):
            parts[f"{attempt['part']} {'ok' if not attempt['failures'] else 'rejected'}"] += 1
    # a round that ended without a complete program is recorded as a failed `static/no_program`: it is construction
    final = "construction" if "no_program" in outcome.checks or outcome.stage == "repair" else outcome.stage
    # how far the seed got is its furthest round: a repair round can end earlier than the program it repairs
    rounds = [_round_stage(_read(path)) for path in sorted(seed_dir.glob("validation_r*.json"))]
    stage = max([final, *rounds], key=lambda s: ORDER.index(s) if s in ORDER else 0)
    return {
        "seed": seed_id, "stage": stage, "final_stage": final, "round_stages": rounds, "status": outcome.status,
        "reason": outcome.reason.splitlines()[0][:160] if outcome.reason else "",
        "design_attempts": dict(design), "part_attempts": dict(sorted(parts.items())),
        "repair_rounds": outcome.repair_rounds, "completion_tokens": outcome.completion_tokens,
        "seconds": outcome.seconds,
    }  # fmt: skip


def funnel(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many seeds got at least as far as each milestone."""
    reached = [ORDER.index(r["stage"]) if r["stage"] in ORDER else 0 for r in rows]
    return {name: sum(i >= ORDER.index(stage) for i in reached) for name, stage in FUNNEL.items()}


def run_variant(
    args: argparse.Namespace,
    variant: str,
    client: Any,
    deadline: float,
    designs_from: Path | None = None,
    save: Any = None,
) -> dict[str, Any]:
    """Run the seeds (one at a time, until `deadline`) in `variant`; the result of that variant.

    With `designs_from` (the offline model: greedy, and its design stage is the same in both variants), each seed
    starts from the design that variant wrote, so the comparison spends its time on construction.
    """
    structured, construction = VARIANTS[variant]
    if hasattr(client, "structured"):
        client.structured, client.schema_accepted, client.structured_note = structured, None, None
    out = Path(args.out or tempfile.mkdtemp(prefix="gymverse-stages-")) / variant
    sampling = {} if args.max_tokens is None else {"max_tokens": args.max_tokens}
    config = SynthConfig(out=out, max_repairs=args.max_repairs, sampling=sampling, concurrency=1,
                         abstraction_attempts=args.attempts, construction=construction)  # fmt: skip
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for seed in domain_seeds(args.domain, args.n):
        if time.perf_counter() > deadline:
            break
        earlier = designs_from / seed.id / "abstraction.json" if designs_from is not None else None
        if earlier is not None and earlier.is_file():
            (out / seed.id).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(earlier, out / seed.id / "abstraction.json")
        outcome = run_pipeline([seed], client, config, progress=False).outcomes[0]
        rows.append(_row(out, seed.id, outcome))
        if save is not None:  # a bounded or interrupted run still reports the seeds it finished
            save(_result(variant, client, construction, structured, designs_from, out, rows, started))
        print(f"[{variant} {len(rows)}/{args.n}] {seed.id}: {outcome.stage} ({outcome.seconds:.0f}s)", flush=True)
    return _result(variant, client, construction, structured, designs_from, out, rows, started)


def _result(
    variant: str, client: Any, construction: str, structured: str, designs_from: Path | None, out: Path,
    rows: list[dict[str, Any]], started: float,
) -> dict[str, Any]:  # fmt: skip
    seconds = time.perf_counter() - started
    return {
        "variant": variant, "construction": construction,
        "structured": structured if hasattr(client, "structured") else "schema-guided decoding (local)",
        "structured_note": getattr(client, "structured_note", None), "seeds_done": len(rows),
        "seconds": round(seconds, 1), "seconds_per_seed": round(seconds / len(rows), 1) if rows else None,
        "designs_reused_from": str(designs_from) if designs_from is not None else None, "out": str(out),
        "funnel": funnel(rows), "stages_reached": dict(Counter(r["stage"] for r in rows)), "seeds": rows,
    }  # fmt: skip


def main() -> None:
    """Run the variants, print the funnel and per-seed tables, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", default="local", help="'local' (default) or an OpenAI-compatible base URL")
    ap.add_argument("--model", default=None, help="model name sent to a server")
    ap.add_argument("--domain", default="Logic")
    ap.add_argument("--n", type=int, default=2, help="seeds per variant (default 2)")
    ap.add_argument(
        "--variants", default="sketch,after,before", help="comma-separated: sketch, after, before (default all)"
    )
    ap.add_argument("--max-tokens", type=int, default=None, help="token cap per request (default: the client's)")
    ap.add_argument("--max-repairs", type=int, default=0, help="repair rounds (default 0: first programs)")
    ap.add_argument("--attempts", type=int, default=1, help="design attempts per seed (default 1)")
    ap.add_argument("--max-seconds", type=float, default=1800, help="start no seed after this many seconds")
    ap.add_argument("--label", default="", help="suffix of the JSON file")
    ap.add_argument("--timeout", type=float, default=900.0, help="a server's request timeout (s; CPU servers are slow)")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--designs-from", default=None, help="offline model: take designs from this run dir")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variants {unknown}; expected {', '.join(VARIANTS)}")
    t0 = time.perf_counter()
    extra = {"timeout": args.timeout} if args.llm.startswith(("http://", "https://")) else {}
    client = get_client(args.llm, model=args.model, **extra)
    load_s = time.perf_counter() - t0
    deadline = t0 + args.max_seconds
    results: list[dict[str, Any]] = []
    for variant in variants:
        reuse = Path(results[0]["out"]) if results and args.llm == "local" else None
        if args.designs_from and args.llm == "local":
            reuse = Path(args.designs_from)
        save = functools.partial(_save, args, client.model, load_s, list(results))
        results.append(run_variant(args, variant, client, deadline, reuse, save))
        path = _write(args, client.model, load_s, results)
    console = Console(width=160)
    for result in results:
        _print(console, args, client.model, result)
    console.print(f"wrote {path}")


def _print(console: Console, args: argparse.Namespace, model: str, result: dict[str, Any]) -> None:
    table = Table(title=f"{result['variant']}: {model}, {args.domain}, construction={result['construction']}")
    for col in ("seed", "stage reached", "design", "parts", "first reason", "s"):
        table.add_column(col, overflow="fold")
    for r in result["seeds"]:
        design = ", ".join(f"{k} {v}" for k, v in sorted(r["design_attempts"].items()))
        parts = ", ".join(f"{k} {v}" for k, v in r["part_attempts"].items())
        table.add_row(r["seed"], r["stage"], design, parts, r["reason"], f"{r['seconds']:.0f}")
    console.print(table)
    funnel_line = ", ".join(f"{k} {v}/{result['seeds_done']}" for k, v in result["funnel"].items())
    console.print(f"{result['variant']} funnel: {funnel_line}; {result['seconds_per_seed']} s/seed")
    if result["structured_note"]:
        console.print(f"note: {result['structured_note']}", markup=False)


def _save(
    args: argparse.Namespace, model: str, load_s: float, done: list[dict[str, Any]], partial: dict[str, Any]
) -> None:
    _write(args, model, load_s, [*done, partial])


def _write(args: argparse.Namespace, model: str, load_s: float, results: list[dict[str, Any]]) -> Path:
    payload = {
        "benchmark": "local_synth_stages",
        "label": args.label,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                    "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]},
        "llm": args.llm, "model": model, "domain": args.domain, "max_tokens": args.max_tokens,
        "max_repairs": args.max_repairs, "design_attempts_per_seed": args.attempts,
        "model_load_s": round(load_s, 2), "variants": results,
    }  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"local_synth_stages{'-' + args.label if args.label else ''}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    main()
