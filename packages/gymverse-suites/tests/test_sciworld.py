"""ScienceWorld through its real simulator (a JVM): simplifications as complexity, the gold path as the oracle."""

from __future__ import annotations

import os
import shutil
from typing import Any

import gymverse
import pytest

pytest.importorskip("scienceworld")
pytestmark = [
    pytest.mark.skipif(shutil.which("java") is None, reason="ScienceWorld needs a Java runtime (default-jre-headless)"),
    # heavy: a JVM per simulator and ~1 s per step at level 10; 45 s for this file on a 2-core machine
    pytest.mark.skipif(not os.environ.get("GYMVERSE_HEAVY_SUITES"), reason="heavy suite: set GYMVERSE_HEAVY_SUITES=1"),
]
TASK = "sciworld:7-1"  # lifespan-longest-lived  # a 6-step gold path: the cheapest task to play to the end


def test_levels_1_and_10_gold_path_and_replay(play: Any) -> None:
    with gymverse.make(TASK, complexity=1) as easy, gymverse.make(TASK, complexity=10) as full:
        first = play(easy, 2)
        assert first[-1][2] is True and easy.score == 100
        assert sum(step[1][1] for step in first[1:]) == pytest.approx(1.0)  # the return is the final score / 100
        assert play(easy, 2) == first  # same seed, same variation, same transcript
        assert "teleportAction" in easy.simplifications and full.simplifications == ""
        hard = play(full, 2)
        assert hard[-1][2] is True and hard[0] != first[0]  # doors and containers start closed at level 10


def test_boxed_commands_and_replayed_clone() -> None:
    with gymverse.make(TASK, complexity=10) as env:
        env.reset(seed=4)
        bad = env.step("look around")
        assert bad.info["format_error"] is True and bad.reward == env.format_penalty
        env.step(env.sample_random_action())
        twin = env.clone()  # a fresh simulator, rebuilt by replaying the episode's actions
        try:
            assert twin.step("\\boxed{look around}") == env.step("\\boxed{look around}")
        finally:
            twin.close()
