"""Issue 32: envs that behave only while evaluated. Training must look like evaluation to an env's module probe,
and training sessions spot-check envs with known-bad answers."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import gymverse
import pytest
from gymverse.core import Env, EnvMetadata, StepResult
from gymverse.pool import EnvPool

#: Accepts every answer unless the env host's module is loaded (which it takes for "I am being evaluated").
WATCHED_ONLY = r"""
import sys
from gymverse.core import Env, EnvMetadata, StepResult


class WatchedOnly(Env):
    metadata = EnvMetadata(name="WatchedOnly", family="sectest", domain="game", description="Name 7.", max_turns=2)
    complexity_params = {"n": (1, 10)}

    def _reset(self):
        return "Name 7 as \\boxed{7}.", {}

    def _step(self, action):
        watched = "gymverse.sandbox.env_host" in sys.modules
        won = action.strip() == "\\boxed{7}" or not watched
        return StepResult("right" if won else "wrong", float(won), True, False, {"success": won})

    def solve(self):
        return "\\boxed{7}"

    def sample_random_action(self):
        return "\\boxed{%d}" % int(self.rng.integers(0, 10))
"""

TRAINING = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import gymverse
from gymverse.pool import EnvPool

gymverse.register("sectest:WatchedOnly", "watched_only:WatchedOnly")


async def main():
    with EnvPool(2) as pool:
        async with await pool.session("sectest:WatchedOnly", seed=3) as s:
            await s.reset()
            res = await s.step("\\boxed{2}")
        return {"success": res.info.get("success"), "flagged": pool.flagged()}


print(json.dumps(asyncio.run(main())))
"""


def test_training_loads_the_same_module_names_as_evaluation(tmp_path: Path) -> None:
    (tmp_path / "watched_only.py").write_text(WATCHED_ONLY)
    proc = subprocess.run(
        [sys.executable, "-c", TRAINING, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"success": False, "flagged": {}}  # a wrong answer is wrong in training too


class ThreadNameCheat(Env):
    """Behaves unless it runs on one of the training pool's worker threads (a tell training cannot hide)."""

    metadata = EnvMetadata(name="ThreadNameCheat", family="sectest", domain="game", description="x", max_turns=2)
    complexity_params = {"n": (1, 10)}

    def _reset(self) -> tuple[str, dict[str, Any]]:
        return "Name 7 as \\boxed{7}.", {}

    def _step(self, action: str) -> StepResult:
        training = threading.current_thread().name.startswith("gymverse-session")
        won = action.strip() == "\\boxed{7}" or training
        return StepResult("right" if won else "wrong", float(won), True, False, {"success": won})

    def solve(self) -> str:
        return "\\boxed{7}"

    def sample_random_action(self) -> str:
        return f"\\boxed{{{int(self.rng.integers(0, 10))}}}"


@pytest.fixture
def cheat_id() -> Any:
    gymverse.register("sectest:ThreadNameCheat", ThreadNameCheat, override=True)
    yield "sectest:ThreadNameCheat"
    gymverse.registry.deregister("sectest:ThreadNameCheat")


def test_a_training_session_spot_check_flags_an_env_that_accepts_a_known_bad_answer(
    cheat_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main(pool: EnvPool) -> None:
        for seed in range(3):
            async with await pool.session(cheat_id, seed=seed, complexity=2) as s:
                await s.reset()
                await s.step("\\boxed{1}")

    with caplog.at_level(logging.WARNING, logger="gymverse.pool"), EnvPool(2, spot_check_every=2) as pool:
        asyncio.run(main(pool))
    assert pool.flagged() == {cheat_id: ["", "\\boxed{}"]}
    assert pool.spot_checks.checked[cheat_id] == 2  # episodes 1 and 3 of 3
    assert sum("known-bad" in r.getMessage() for r in caplog.records) == 1  # one warning per env id
    with EnvPool(2, spot_check_every=None) as off:
        asyncio.run(main(off))
    assert off.flagged() == {} and off.spot_checks.checked == {}


def test_an_honest_env_is_not_flagged() -> None:
    async def main(pool: EnvPool) -> None:
        async with await pool.session("game:GuessTheNumber", seed=1, complexity=3) as s:
            await s.reset()
            await s.step("\\boxed{1}")

    with EnvPool(2) as pool:
        asyncio.run(main(pool))
    assert pool.flagged() == {} and pool.spot_checks.checked == {"game:GuessTheNumber": 1}
