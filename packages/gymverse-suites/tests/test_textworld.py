"""TextWorld through its own generator and interpreter: generator options as complexity, TextWorld's plan as oracle.

Heavy (spaCy, jericho built from source): CI runs this file in its own environment (`.ci/run`, block
``suites-textworld``); without the package every test here skips and says so.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymverse
import pytest

pytest.importorskip("textworld", reason="textworld is not installed: pip install 'gymverse-suites[textworld]'")
from gymverse.checker import check_env
from gymverse_suites.textworld import QUEST_LENGTH, ROOMS, TextWorld, generate

ENV = "textworld:TextWorld"


def _digest(env: Any) -> str:
    return hashlib.sha256(Path(env.game_file).read_bytes()).hexdigest()


@pytest.mark.parametrize("level", [1, 10])
def test_textworlds_plan_wins_at_levels_1_and_10_and_the_seed_fixes_game_and_transcript(level: int, play: Any) -> None:
    with gymverse.make(ENV, complexity=level) as env, gymverse.make(ENV, complexity=level) as again:
        transcript = play(env, 5)
        game = _digest(env)
        assert env.params["nb_rooms"] == ROOMS[level - 1] and env.params["quest_length"] == QUEST_LENGTH[level - 1]
        assert transcript[-1][2] is True and env.score == env.max_score
        assert sum(step[1][1] for step in transcript[1:]) == pytest.approx(1.0)  # the return is score / max score
        assert len(transcript) - 1 >= QUEST_LENGTH[level - 1]  # at least one command per quest step
        generate.cache_clear()  # the replay compiles its game anew
        assert play(again, 5) == transcript and _digest(again) == game  # same seed: same game file, same transcript
    if level == 1:  # and in another process, with another string-hash seed
        code = f"import gymverse; e = gymverse.make({ENV!r}); e.reset(seed=5); print(e.game_file.read_bytes().hex())"
        run = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": "7"},
                             capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
        assert hashlib.sha256(bytes.fromhex(run.stdout.strip())).hexdigest() == game


def test_commands_clone_and_the_game_folder_removed_at_close() -> None:
    env = gymverse.make(ENV, complexity=3)
    assert isinstance(env, TextWorld)
    env.reset(seed=1)
    folder = Path(env.game_file).parent
    assert env.step("look").info["format_error"] is True
    env.step(env.sample_random_action())
    twin = env.clone()  # its own folder and interpreter, rebuilt by replaying the commands
    assert isinstance(twin, TextWorld)
    try:
        assert Path(twin.game_file).parent != folder
        assert twin.step("\\boxed{inventory}") == env.step("\\boxed{inventory}")
    finally:
        twin.close()
    while not (res := env.step(env.solve())).done:
        pass
    assert res.info["success"] is True
    assert folder.is_dir() and [p.suffix for p in folder.iterdir()].count(".z8") == 1  # one game on disk
    env.close()
    assert not folder.exists()


def test_checker_passes_levels_1_and_10() -> None:
    report = check_env(ENV, levels=(1, 10), seeds=(0,))
    assert report.passed, report.summary()


def test_the_registry_lists_textworld_once_installed() -> None:
    # What `gymverse list` shows (the command itself is the `gymverse` package, not installed in this environment).
    assert "textworld:TextWorld" in gymverse.list_envs("textworld")
