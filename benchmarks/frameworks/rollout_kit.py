"""What the verl and OpenRLHF rollout-overhead benchmarks share: envs, fixed replies, test helpers, timing, rows.

Both scripts compare GymVerse's agent loop in an adapter with the framework's own multi-turn path, driven by the
same zero-cost generator (fixed reply tokens, returned at once in the object type the real server returns), so
only the env layer and the glue are timed. Every episode plays `HORIZON` env steps of the same env with the same
fixed action: `playable_seeds` keeps only seeds whose episode the action does not end early, so both arms do
exactly the same env work, which each script checks by counting the turns it got back.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from common import Target, base_parser, interleaved, print_table, progress, ratio, rounds_of, write_result

REPO = Path(__file__).resolve().parents[2]
HORIZON = 8  # env steps per episode (every env below allows 10 at its default level)
#: env id -> the fixed action both arms send (valid or penalized, never ending the episode within HORIZON)
ENVS: dict[str, str] = {
    "game:GuessTheNumber": r"\boxed{0}",
    "game:Mastermind": r"\boxed{1 2 3}",
    "tool-use:UnitConversion": r"\boxed{units}",
}
CONCURRENCY = (1, 8, 64)
OVERHEAD_LIMIT = 1.0  # issue 34: GymVerse ms/turn <= the native path's at 64 concurrent episodes


def load_test_helpers(adapter: str, filename: str = "conftest.py") -> ModuleType:
    """A module of an adapter's tests (its tokenizer, config and batch helpers: reused, not copied)."""
    path = REPO / "packages" / adapter / "tests" / filename
    name = f"_gymverse_bench_{adapter}_{filename.removesuffix('.py')}".replace("-", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def fixture_function(fixture: Any) -> Callable[..., Any]:
    """The plain function behind a pytest fixture (pytest refuses direct calls of the fixture object)."""
    return getattr(fixture, "__wrapped__", fixture)


def playable_seeds(env_id: str, action: str, count: int, horizon: int = HORIZON) -> list[int]:
    """The first `count` seeds on which `action`, repeated, keeps `env_id` running for `horizon` steps."""
    import gymverse

    env, seeds, seed = gymverse.make(env_id), [], 0
    while len(seeds) < count:
        env.reset(seed=seed)
        if not any(any(env.step(action)[2:4]) for _ in range(horizon)):
            seeds.append(seed)
        seed += 1
        if seed > 100 * count + 100:
            raise RuntimeError(f"{action!r} ends too many {env_id} episodes early; pick another fixed action")
    return seeds


def first_observation(env_id: str, seed: int) -> str:
    """The observation the env resets to (what a framework's dataset row carries as the prompt)."""
    import gymverse

    return str(gymverse.make(env_id).reset(seed=seed)[0])


def timed_batches(
    play: Callable[[list[int]], Awaitable[Sequence[int]]], seeds: Sequence[int], concurrency: int, episodes: int
) -> dict[str, float]:
    """Play `episodes` episodes, `concurrency` at a time (``play(seeds) -> turns per episode``); episodes/s, ms/turn."""

    async def main() -> tuple[float, int]:
        turns, start = 0, time.perf_counter()
        for b in range(max(1, episodes // concurrency)):
            batch = [seeds[(b * concurrency + i) % len(seeds)] for i in range(concurrency)]
            got = await play(batch)
            if any(t != HORIZON for t in got):
                raise RuntimeError(f"an episode played {sorted(set(got))} turns, not {HORIZON}: the arms differ")
            turns += sum(got)
        return time.perf_counter() - start, turns

    wall, turns = asyncio.run(main())
    return {"episodes_per_s": turns / HORIZON / wall, "ms_per_turn": 1000.0 * wall / turns}


def rollout_rows(framework: str, results: dict[tuple[str, int], dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Table/JSON rows: per env and concurrency, both arms' medians and GymVerse/native ms-per-turn ratio."""
    rows = []
    for (env_id, n), arms in results.items():
        native, gym = arms["native"], arms["gymverse"]
        for arm, m in (("native", native), ("gymverse", gym)):
            rows.append(
                {
                    "framework": framework,
                    "case": f"{env_id} x{n}",
                    "arm": arm,
                    "env": env_id,
                    "concurrency": n,
                    **m,
                    "ratio_vs_native": ratio(m["ms_per_turn"], native["ms_per_turn"]),
                }
            )
    return rows


def overhead_targets(framework: str, rows: Sequence[dict[str, Any]]) -> list[Target]:
    """One target per env at the highest concurrency: GymVerse ms/turn within `OVERHEAD_LIMIT` of the native path."""
    top = max(r["concurrency"] for r in rows)
    out = []
    for r in rows:
        if r["arm"] == "gymverse" and r["concurrency"] == top:
            native = next(x for x in rows if x["case"] == r["case"] and x["arm"] == "native")
            out.append(
                Target(
                    name=f"{framework} adapter ms/turn vs native, {r['case']}",
                    value=round(r["ratio_vs_native"], 4),
                    limit=OVERHEAD_LIMIT,
                    unit="x native",
                    met=r["ratio_vs_native"] <= OVERHEAD_LIMIT,
                    note=f"gymverse {r['ms_per_turn']:.3f} ms/turn, native {native['ms_per_turn']:.3f} ms/turn",
                )
            )
    return out


ROLLOUT_COLUMNS = ("case", "arm", "episodes_per_s", "ms_per_turn", "ratio_vs_native")

Play = Callable[[str, list[int]], Awaitable[Sequence[int]]]  # (env id, seeds) -> turns per episode


def run_rollout_bench(
    framework: str, args: Any, rounds: int, bench: Any, *, title: str, packages: Sequence[str], gpu: bool
) -> None:
    """`bench`'s ``play_native``/``play_gymverse`` interleaved per env and concurrency; prints a table, writes JSON."""
    arms: dict[str, Play] = {"native": bench.play_native, "gymverse": bench.play_gymverse}
    name = f"{framework}_rollout" + ("_gpu" if gpu else "")
    title += ", a real model's generation on the GPU" if gpu else ", zero-cost generator"
    levels = (1, 8) if args.quick else CONCURRENCY
    episodes = 8 if args.quick else 64
    envs = list(ENVS.items())[:1] if args.quick else list(ENVS.items())
    results = {}
    for env_id, action in envs:
        seeds = playable_seeds(env_id, action, 64)
        for n in levels:
            timed = {arm: _timed(play, env_id, seeds, n, max(episodes, n)) for arm, play in arms.items()}
            for measure in timed.values():  # warm-up: imports, template compilation, the session pool's threads
                measure()
            results[(env_id, n)] = interleaved(timed, rounds, label=f"{framework} rollout {env_id} x{n}")
    rows = rollout_rows(framework, results)
    print_table(title, rows, ROLLOUT_COLUMNS)
    write_result(
        name,
        title,
        rows,
        args=args,
        plot_metric="ms_per_turn",
        plot_label="ms per turn (lower is better)",
        lower_is_better=True,
        targets=[] if gpu else overhead_targets(framework, rows),
        packages=packages,
        extra={"baseline": "native", "horizon": HORIZON, "envs": ENVS},
    )


def _timed(play: Play, env_id: str, seeds: list[int], n: int, episodes: int) -> Callable[[], dict[str, float]]:
    return lambda: timed_batches(lambda batch: play(env_id, batch), seeds, n, episodes)


def gpu_generator(seed: int = 0) -> Callable[[list[int], int], Awaitable[None]] | None:
    """With CUDA: ``await gen(prompt_ids, n)`` runs a real model's generation of `n` tokens (None without CUDA).

    The model is a small Llama built here with random weights (nothing is downloaded): 8 layers of width 512 and
    a 32k vocabulary (covering the benchmark tokenizers' ids), in bf16, generating with ``transformers``
    ``generate`` (greedy, exactly `n` new tokens, KV cache). Calls are serialized on the one GPU in a worker
    thread, so the event loop (env steps, glue) keeps running meanwhile.
    The fixed reply tokens are still what the agent loops get back, so both arms keep their protocol.
    """
    import torch

    if not torch.cuda.is_available():
        return None
    from gymverse.testing import random_causal_lm

    shape = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8)
    model = random_causal_lm(32000, seed=seed, **shape, num_key_value_heads=8, max_position_embeddings=16384)
    model = model.to("cuda", dtype=torch.bfloat16).eval()
    lock = threading.Lock()  # not asyncio's: each measurement runs its own event loop

    def run(prompt_ids: list[int], n: int) -> None:
        with lock, torch.no_grad():
            ids = torch.tensor([prompt_ids], device="cuda")
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()

    async def gen(prompt_ids: list[int], n: int) -> None:
        await asyncio.to_thread(run, prompt_ids, n)

    return gen


def run_framework(
    framework: str,
    description: str,
    bench_rollout: Callable[..., None],
    bench_advantage: Callable[[Any, int], None],
) -> None:
    """A framework script's main: parse the common flags, rollout, advantage, then the GPU section (``--gpu``)."""
    import torch

    args = base_parser(description).parse_args()
    torch.set_num_threads(1)
    rounds = rounds_of(args)
    progress(f"{framework}: rollout overhead")
    bench_rollout(args, rounds)
    progress(f"{framework}: advantage step")
    bench_advantage(args, rounds)
    if args.gpu:
        gen = gpu_generator()
        if gen is None:
            print(f"--gpu: no CUDA device here; the {framework} GPU section is skipped")
        else:
            progress(f"{framework}: rollout with a real model's generation on the GPU")
            bench_rollout(args, rounds, gpu=gen)
