"""Shared fixtures of the gymverse-viewer tests."""

from __future__ import annotations

import signal
from typing import Any

import pytest

# Children inherit an ignored SIGINT (a test run started in the background or under nohup), and tests that
# interrupt a child (`gymverse view`) would then wait for nothing. A Python handler here is reset to the default
# in every child at exec.
signal.signal(signal.SIGINT, signal.default_int_handler)


# --------------------------------------------------------------------------------------- trajectory viewer fixture
class _CrashingSession:
    """A session whose env crashes on the first step (the collector records the episode with ``error``)."""

    env_id = "broken:Crashes"

    def set_complexity(self, level: int) -> None:
        pass

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return "You are in a broken env.", {"complexity": 1}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        raise RuntimeError("simulated env crash")

    async def close(self) -> None:
        pass


@pytest.fixture(scope="session")
def trajectory_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A run directory as the viewer meets it: sampled rollouts, collector output with a format error, a crashed
    episode and a hostile action, a non-trajectory JSONL, and a file with a corrupt line."""
    from gymverse.rollout import PlainRenderer, RolloutCollector, Session, make_sessions, text_generate
    from gymverse.trajectory import Trajectory, Turn, write_jsonl
    from gymverse.viewer.sample import sample_trajectories

    root = tmp_path_factory.mktemp("run")
    (root / "rollouts").mkdir()
    write_jsonl(sample_trajectories(4, 30, seed=1), root / "rollouts" / "steps.jsonl")

    async def policy(prompt: str) -> str:
        turn = prompt.count("Observation:") - 1  # replies so far in this episode
        if turn == 0:
            return "I guess zebra-needle, no box this time"
        return f"Counting up from the bottom.\n\\boxed{{{turn}}}"

    sessions: list[Session] = [*make_sessions(["game:GuessTheNumber"] * 2), _CrashingSession()]
    trajs = RolloutCollector(text_generate(policy, PlainRenderer())).collect_sync(sessions, seeds=[11, 12, 13])
    write_jsonl(trajs, root / "collector.jsonl")

    (root / "notes.jsonl").write_text('{"idea": "not a trajectory"}\n', encoding="utf-8")
    attack = "</script><script>window.pwned=1</script><img src=x onerror='window.pwned=2'>"
    hostile = Trajectory("game:Hostile", 5, 2, [Turn("obs <b>bold</b>", attack, 0.0)])
    with open(root / "mixed.jsonl", "w", encoding="utf-8") as fh:
        fh.write(hostile.to_json() + "\n{not json\n")
    return root
