"""One training run's driver for `test_two_runs_on_one_cluster_keep_separate_levels` (a subprocess, i.e. its own
Ray job, on a cluster started with ``ray start --head``).

``python verl_two_runs_driver.py ADDRESS TAG OTHER_TAG BARRIER_DIR win|lose`` builds the GymVerse trainer from verl's
config (README overrides, default curriculum actor name), waits until the other run's trainer exists too, plays two
episodes through the agent loop (all won or all lost), closes one curriculum step, waits for the other run again,
plays one more episode and prints one JSON line: the actor name, the levels after the step and the next level.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def wait_for(path: Path, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.2)


def play(conftest: Any, tokenizer: Any, policy: Any, seeds: list[int]) -> list[Any]:
    config = conftest.make_config(evolve=True, patience=1)
    server = conftest.ScriptedServer(tokenizer, policy=policy)

    async def main() -> list[Any]:
        loops = [conftest.make_agent_loop(config, server, tokenizer) for _ in seeds]
        rows = [conftest.row("game:GuessTheNumber", s) for s in seeds]
        return list(await asyncio.gather(*(lp.run({}, **r) for lp, r in zip(loops, rows))))

    return asyncio.run(main())


def main(address: str, tag: str, other: str, barrier: Path, mode: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import conftest  # imports verl (registers the plugin)
    import ray
    from gymverse.curriculum import run_scoped_name
    from gymverse_verl import CURRICULUM_ACTOR
    from verl.trainer.ppo.v1 import get_trainer_cls

    ray.init(address=address, log_to_driver=False)
    overrides = [o for o in conftest.readme_overrides() if "gymverse.horizon" not in o]
    trainer = get_trainer_cls("gymverse_sync")(conftest.compose([*overrides, "+gymverse.patience=1"]))
    name = trainer._curriculum.name
    # verl's agent-loop workers are Ray actors of this job: they resolve the same run-scoped name
    in_worker = ray.get(ray.remote(num_cpus=0)(run_scoped_name).remote(CURRICULUM_ACTOR))
    (barrier / f"{tag}.started").touch()
    wait_for(barrier / f"{other}.started")  # both runs' actors exist now (the second did not replace the first)

    tokenizer = conftest.tiny_tokenizer(conftest.CORPUS * 4, "chatml", vocab_size=400)
    policy = conftest.guess_policy if mode == "win" else (lambda _: "\\boxed{0}")
    first = play(conftest, tokenizer, policy, [1, 2])
    metrics: dict[str, Any] = {}
    trainer.end_curriculum_step(metrics)
    (barrier / f"{tag}.stepped").touch()
    wait_for(barrier / f"{other}.stepped")  # the other run closed its step too
    nxt = play(conftest, tokenizer, policy, [3])[0]
    result = {
        "name": name,
        "in_worker": in_worker,
        "first_levels": [o.extra_fields["gymverse"]["level"] for o in first],
        "levels": trainer._curriculum.levels(),
        "next_level": nxt.extra_fields["gymverse"]["level"],
        "metrics": metrics,
    }
    (barrier / f"{tag}.done").touch()
    wait_for(barrier / f"{other}.done")
    trainer._curriculum.stop()
    print("RESULT " + json.dumps(result), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5])
