"""Per-turn cost of the one episode pipeline (`run_episode` + `ChatRenderer`) against re-rendering the history.

Every turn, `run_episode` steps the env and tokenizes only the new env turn (rendered through the real Qwen3 chat
template). The common alternative, re-rendering and re-tokenizing the whole conversation with
``apply_chat_template`` before each generation (and diffing), grows with the episode length. Both run the same
env (`game:GuessTheNumber` at level 10 with a 200-guess budget; a fixed wrong guess, so episodes last `turns`
turns) with an instant generator, so only the framework-side work is timed; ``env only`` is the bare ``env.step``
loop. Prints a table
(median of R repeats, ms per turn) and writes ``benchmarks/results/episode_pipeline.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import gymverse
from gymverse.rollout import ChatRenderer, Generation, InProcessSession, run_episode
from gymverse.testing import tiny_tokenizer
from rich.console import Console
from rich.table import Table

ENV = "game:GuessTheNumber"


def qwen3_tokenizer() -> Any:
    """A byte-level BPE tokenizer with Qwen's special tokens and the real Qwen3 template (built locally)."""
    env = gymverse.make(ENV, complexity=10)
    corpus = [env.reset(seed=s)[0] + " is too low. Higher. \\boxed{1}" for s in range(50)]
    return tiny_tokenizer(corpus, "qwen3", vocab_size=800)


def pipeline(tok: Any, turns: int) -> float:
    reply = [*tok.encode("\\boxed{1}", add_special_tokens=False), tok.eos_token_id]
    renderer = ChatRenderer(tok)

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        return Generation(reply)

    async def main() -> float:
        session = InProcessSession.make(ENV, complexity=10, max_turns=200)
        start = time.perf_counter()
        traj = await run_episode(session, generate, renderer=renderer, horizon=turns, seed=0)
        assert len(traj.turns) == turns
        return (time.perf_counter() - start) / turns

    return asyncio.run(main())


def rerender(tok: Any, turns: int) -> float:
    env = gymverse.make(ENV, complexity=10, max_turns=200)
    start = time.perf_counter()
    obs, _ = env.reset(seed=0)
    messages = [{"role": "user", "content": obs}]
    for _ in range(turns):
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        assert len(ids) > 0
        obs = env.step("\\boxed{1}")[0]
        messages += [{"role": "assistant", "content": "\\boxed{1}"}, {"role": "user", "content": obs}]
    return (time.perf_counter() - start) / turns


def env_only(tok: Any, turns: int) -> float:
    env = gymverse.make(ENV, complexity=10, max_turns=200)
    start = time.perf_counter()
    env.reset(seed=0)
    for _ in range(turns):
        env.step("\\boxed{1}")
    return (time.perf_counter() - start) / turns


def main() -> None:
    """Run the benchmark, print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="+", default=[5, 20, 50])
    args = parser.parse_args()
    console = Console()
    tok = qwen3_tokenizer()
    runners = {"run_episode + ChatRenderer": pipeline, "re-render history": rerender, "env only": env_only}
    rows: list[dict[str, Any]] = []
    for turns in args.turns:
        for name, fn in runners.items():
            times = [fn(tok, turns) for _ in range(args.repeats)]
            rows.append({"runner": name, "turns": turns, "ms_per_turn": 1e3 * statistics.median(times)})
            console.print(f"[dim]{name} turns={turns}: {rows[-1]['ms_per_turn']:.3f} ms/turn[/dim]")
    table = Table(
        title=f"Per-turn framework-side cost, median of {args.repeats} ({platform.processor() or platform.machine()})"
    )
    table.add_column("turns", justify="right")
    for name in runners:
        table.add_column(f"{name} (ms/turn)", justify="right")
    table.add_column("re-render / pipeline", justify="right")
    for turns in args.turns:
        got = {r["runner"]: r["ms_per_turn"] for r in rows if r["turns"] == turns}
        ratio = got["re-render history"] / got["run_episode + ChatRenderer"]
        table.add_row(str(turns), *(f"{got[n]:.3f}" for n in runners), f"{ratio:.2f}x")
    console.print(table)
    out = Path(__file__).parent / "results" / "episode_pipeline.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "repeats": args.repeats, "rows": rows}, indent=1))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
