"""``benchmarks/SUMMARY.md``: every issue-34 target with its measured ratio, peer, command, machine, load and verdict.

Read from the result JSONs the benchmarks write (nothing is measured here); a target whose JSON is absent is listed as
not measured, with the command that measures it. The limits are the issue's:

* sessions >= 1.0x GEM ``AsyncVectorEnv`` (steps/s) on the cheap and the I/O env at 8 and 64 concurrent episodes
  (``env_layer.json``, column ``vs gem AsyncVectorEnv``);
* adapter per-turn cost <= 1.0x the framework's native multi-turn path at 64 concurrent episodes (verl and
  OpenRLHF: wall ms/turn, ``{verl,openrlhf}_rollout.json``; RL2 and oat: process CPU ms/turn, ``{rl2,oat}.json``);
* ``gymverse evaluate`` with the hosted checker <= 1.1x the in-process checker: ``hosted_over_inprocess`` in the
  JSONs of ``benchmarks/evaluate_corpus.py``, and targets whose name mentions "hosted" in any result JSON;
* ``gymverse train`` rollout tokens/s and update time within 1.5x of plain ``transformers`` (``train_gpu*.json``,
  ``peers``, written by ``benchmarks/train_gpu.py`` with `train_peers`; one pair of rows per run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from summary import machine_line, markdown_table

ROOT = Path(__file__).resolve().parents[2]
ISSUE = 34
SESSION_LIMIT, TURN_LIMIT, HOSTED_LIMIT, TRAIN_LIMIT = 1.0, 1.0, 1.1, 1.5
#: result file -> (script, venv) that writes it
SCRIPTS = {
    "env_layer": ("benchmarks/frameworks/bench_env_layer.py", ".venv"),
    "verl_rollout": ("benchmarks/frameworks/bench_verl.py", ".venv-verl"),
    "openrlhf_rollout": ("benchmarks/frameworks/bench_openrlhf.py", ".venv-openrlhf"),
    "rl2": ("benchmarks/frameworks/bench_rl2.py", ".venv-rl2"),
    "oat": ("benchmarks/frameworks/bench_oat.py", ".venv-oat"),
    "train_gpu": ("benchmarks/train_gpu.py", ".venv"),
}
#: framework -> (result file, case of the 64-episode row per env, metric the ratio is of, native arm's name)
TURN_FILES = {
    "verl": ("verl_rollout", "{env} x64", "wall ms/turn", "verl native agent loop"),
    "OpenRLHF": ("openrlhf_rollout", "{env} x64", "wall ms/turn", "OpenRLHF native agent executor"),
    "RL2": ("rl2", "rollout {env} x64", "CPU ms/turn", "RL2's own turn loop (env file)"),
    "oat": ("oat", "rollout {env} x64", "CPU ms/turn", "oat's single-turn PPOActor.step"),
}
TURN_ENVS = ("game:GuessTheNumber", "game:Mastermind", "tool-use:UnitConversion")


@dataclass(frozen=True)
class Line:
    """One target's row of the summary table."""

    target: str
    measured: float | None
    limit: str
    met: bool | None  # None: not measured
    peer: str
    source: str  # where the figure comes from: command, machine and load
    note: str = ""


def load(path: Path) -> dict[str, Any] | None:
    """A result JSON, or None where it is absent or unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def command(name: str, doc: Mapping[str, Any]) -> str:
    """The command line that wrote `doc` (the flags it recorded)."""
    script, venv = SCRIPTS.get(name, (f"({name})", ".venv"))
    args = doc.get("args") or {}
    flags = [f"--{k}" for k in ("quick", "gpu", "rollout_only") if args.get(k)]
    if args.get("rounds"):
        flags.append(f"--rounds {args['rounds']}")
    python = "uv run python" if venv == ".venv" else f"{venv}/bin/python"
    return " ".join([python, script, *[f.replace("_", "-") for f in flags]])


def source(name: str, doc: Mapping[str, Any], path: Path) -> str:
    """`command`, when and on what (load included) `doc` was measured."""
    return f"`{command(name, doc)}` ({_when(path)}; {machine_line(doc.get('machine') or {})})"


def missing(target: str, limit: str, peer: str, name: str) -> Line:
    """A target whose result file is absent."""
    script, venv = SCRIPTS[name]
    how = f"`{'uv run python' if venv == '.venv' else venv + '/bin/python'} {script}`"
    return Line(target, None, limit, None, peer, f"not measured: no `{name}.json`; run {how}")


def session_lines(results: Path) -> Iterator[Line]:
    """Sessions vs GEM's AsyncVectorEnv, cheap and I/O env, 8 and 64 concurrent episodes."""
    path = results / "frameworks" / "env_layer.json"
    doc, peer = load(path), "GEM AsyncVectorEnv (steps/s)"
    for workload in ("cheap", "io"):
        for n in (8, 64):
            target = f"sessions vs GEM AsyncVectorEnv, {workload} env, N={n}"
            if doc is None:
                yield missing(target, f">= {SESSION_LIMIT}x", peer, "env_layer")
                continue
            row = _row(doc, f"{workload} N={n}", "gymverse sessions")
            gem = _row(doc, f"{workload} N={n}", "gem AsyncVectorEnv")
            value = None if row is None else row.get("vs gem AsyncVectorEnv")
            note = "" if value is not None else "no GEM row in the file (GEM venv missing?)"
            if row is not None and gem is not None and value is not None:
                a, b = row.get("steps_per_s_rounds") or [], gem.get("steps_per_s_rounds") or []
                per_round = [x / y for x, y in zip(a, b) if y] if len(a) == len(b) else []
                note = f"{row['steps_per_s']:,.0f} vs {gem['steps_per_s']:,.0f} steps/s" + (
                    f"; per-round ratios {min(per_round):.2f}-{max(per_round):.2f}" if per_round else ""
                )
            met = None if value is None else value >= SESSION_LIMIT
            yield Line(target, value, f">= {SESSION_LIMIT}x", met, peer, source("env_layer", doc, path), note)


def turn_lines(results: Path) -> Iterator[Line]:
    """Adapter per-turn cost vs each framework's native path at 64 concurrent episodes."""
    for framework, (name, case, metric, peer) in TURN_FILES.items():
        path = results / "frameworks" / f"{name}.json"
        doc = load(path)
        for env in TURN_ENVS:
            target = f"{framework} per-turn cost, {env}, 64 episodes ({metric})"
            if doc is None:
                yield missing(target, f"<= {TURN_LIMIT}x", peer, name)
                continue
            row = _row(doc, case.format(env=env), "gymverse")
            if row is None:
                yield Line(target, None, f"<= {TURN_LIMIT}x", None, peer, source(name, doc, path), "not in this run")
                continue
            value = float(row["ratio_vs_native"])
            note = _turn_note(doc, row, case.format(env=env))
            yield Line(target, value, f"<= {TURN_LIMIT}x", value <= TURN_LIMIT, peer, source(name, doc, path), note)


def _turn_note(doc: Mapping[str, Any], row: Mapping[str, Any], case: str) -> str:
    native: Mapping[str, Any] = next(
        (r for r in doc["rows"] if r.get("case") == case and r.get("arm") != "gymverse"), {}
    )
    key = "cpu_ms_per_turn" if "cpu_ms_per_turn" in row else "ms_per_turn"
    if key not in native:
        return ""
    note = f"gymverse {row[key]:.3f} vs native {native[key]:.3f} ms/turn"
    if "wall_ratio_vs_native" in row:
        note += f"; wall-clock ratio {row['wall_ratio_vs_native']:.2f}"
    return note


def hosted_lines(results: Path) -> Iterator[Line]:
    """The hosted checker: ``hosted_over_inprocess`` of `benchmarks/evaluate_corpus.py`'s JSONs, and any target
    named "hosted" in a result JSON."""
    found = False
    for path in sorted([*results.glob("*.json"), *results.glob("frameworks/*.json")]):
        doc = load(path)
        if doc is not None and isinstance(doc.get("hosted_over_inprocess"), int | float):
            found = True
            value = float(doc["hosted_over_inprocess"])
            loads = [r.get("load_average") for r in (doc.get("runs") or {}).values() if isinstance(r, dict)]
            where = f"`uv run python benchmarks/evaluate_corpus.py` -> `{path.name}` ({_when(path)}; " + (
                f"{(doc.get('machine') or {}).get('cpus', '?')} CPUs, load (start, end) per run {loads})"
            )
            jobs = doc.get("hosted_over_inprocess_jobs")
            note = f"jobs stage {jobs:.2f}x" if isinstance(jobs, int | float) else ""
            yield Line(f"gymverse evaluate, hosted vs in-process checker, {doc.get('suite', path.stem)}", value,
                       f"<= {HOSTED_LIMIT}x", value <= HOSTED_LIMIT, "in-process checker", where, note)  # fmt: skip
        for t in (doc or {}).get("targets") or []:
            if isinstance(t, dict) and "hosted" in str(t.get("name", "")).lower():
                found = True
                name = str((doc or {}).get("benchmark", path.stem))
                where = f"`{path.name}` ({machine_line((doc or {}).get('machine') or {})})"
                limit = f"{t.get('unit', '')} {t.get('limit')}".strip()
                yield Line(str(t["name"]), t.get("value"), limit, bool(t.get("met")), "in-process checker", where,
                           str(t.get("note", "")) or name)  # fmt: skip
    if not found:
        yield Line(
            "gymverse evaluate, hosted checker vs in-process", None, f"<= {HOSTED_LIMIT}x", None,
            "in-process checker", "not measured here: no result JSON in benchmarks/results has `hosted_over_inprocess` "
            "or a hosted-checker target; run `uv run python benchmarks/evaluate_corpus.py` (its executors sandbox "
            "and inprocess; that benchmark belongs to the evaluator change)",
        )  # fmt: skip


def train_lines(results: Path) -> Iterator[Line]:
    """`gymverse train` rollout and update vs plain transformers (`train_peers`), one pair per ``train_gpu*.json``."""
    specs = (
        ("rollout_ratio", "gymverse train rollout tokens/s vs plain generate", "plain `model.generate`"),
        ("update_ratio", "gymverse train update time vs plain loss/backward/step", "plain loss/backward/AdamW"),
    )
    paths = sorted(results.glob("train_gpu*.json"))
    docs = [(path, load(path)) for path in paths]
    measured = [(path, doc) for path, doc in docs if doc is not None and isinstance(doc.get("peers"), dict)]
    if not measured:
        reason = "no `train_gpu*.json`" if not paths else "the `train_gpu*.json` files predate the peer measurement"
        for _, target, peer in specs:
            yield Line(target, None, f"<= {TRAIN_LIMIT}x", None, peer, f"not measured: {reason}; run "
                       "`uv run python benchmarks/train_gpu.py --device cuda` (on a lent GPU machine: "
                       "`benchmarks/device_train_gpu.sh`)")  # fmt: skip
        return
    for path, doc in measured:
        peers, cfg = doc["peers"], doc.get("config") or {}
        device = doc.get("device") or cfg.get("device")
        last = (doc.get("steps") or [{}])[-1]
        run = f"{device}, {doc.get('params_m', '?')}M params, {last.get('episodes', '?')} episodes/step"
        flags = " ".join(f"--{k.replace('_', '-')} {cfg[k]}" for k in ("device", "steps", "hidden", "layers", "prompts")
                         if k in cfg)  # fmt: skip
        where = f"`python benchmarks/train_gpu.py {flags}` ({_when(path)}; {device}" + (
            f", load {doc['load_avg_1m']:.1f})" if isinstance(doc.get("load_avg_1m"), int | float) else ")"
        )
        for key, target, peer in specs:
            value = float(peers[key])
            note = (
                f"{peers['rollout_tokens_per_s']} vs {peers['plain_generate_tokens_per_s']} tokens/s"
                if key == "rollout_ratio"
                else f"{peers['update_s']} s vs {peers['plain_update_s']} s"
            )
            if key == "rollout_ratio" and last.get("layer_ms_per_call") is not None:
                note += f"; GymVerse's own work {last['layer_ms_per_call']} ms per batched turn"
            yield Line(f"{target} ({run})", value, f"<= {TRAIN_LIMIT}x", value <= TRAIN_LIMIT, peer, where, note)


def _when(path: Path) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))


def _row(doc: Mapping[str, Any], case: str, arm: str) -> dict[str, Any] | None:
    return next((r for r in doc.get("rows") or [] if r.get("case") == case and r.get("arm") == arm), None)


def lines(results: Path) -> list[Line]:
    """Every issue-34 target, in the issue's order."""
    return [*session_lines(results), *turn_lines(results), *hosted_lines(results), *train_lines(results)]


def render(rows: Sequence[Line], notes: Sequence[str] = ()) -> str:
    """The Markdown of ``SUMMARY.md``."""
    verdict = {True: "met", False: "**not met**", None: "not measured"}
    out = [
        f"# Issue {ISSUE} targets: measured",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `benchmarks/frameworks/issue34.py` from "
        "the result JSONs in `benchmarks/results/` (ratios: GymVerse / peer, measured side by side in one run, "
        "medians of interleaved rounds; where the load average was 3 or more, the figure was taken on a busy "
        "shared machine and says so).",
        "",
    ]
    out += markdown_table(
        ["target", "measured", "limit", "status", "peer", "reason / detail", "command, machine, load"],
        [
            [
                r.target,
                "–" if r.measured is None else f"{r.measured:.2f}x",
                r.limit,
                verdict[r.met],
                r.peer,
                r.note.replace("|", "\\|"),
                r.source.replace("|", "\\|"),
            ]
            for r in rows
        ],
    )
    met = sum(r.met is True for r in rows)
    missed = sum(r.met is False for r in rows)
    out += ["", f"{met} met, {missed} not met, {sum(r.met is None for r in rows)} not measured.", ""]
    if notes:
        out += ["## Notes", "", *notes, ""]
    return "\n".join(out)


def write(results: Path = ROOT / "benchmarks" / "results", out: Path = ROOT / "benchmarks" / "SUMMARY.md",
          notes_file: Path | None = ROOT / "benchmarks" / "SUMMARY_NOTES.md") -> Path:  # fmt: skip
    """Write `out` from the JSONs under `results` (plus the hand-written reasons in `notes_file`, if present)."""
    notes = notes_file.read_text().strip().splitlines() if notes_file is not None and notes_file.exists() else []
    out.write_text(render(lines(results), notes))
    return out


if __name__ == "__main__":
    print(f"wrote {write()}")
