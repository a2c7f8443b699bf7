"""GEM registry games through core's GEM adapter: easy kwargs at level 1, hard at level 10, GEM's success reward."""

from __future__ import annotations

from typing import Any

import gymverse
import pytest
from gymverse_suites import gem_games

pytest.importorskip("gem")


def test_levels_span_gems_easy_to_hard_kwargs() -> None:
    for game, (_, easy, hard) in gem_games.GAMES.items():
        assert gem_games.level_kwargs(game, 1) == easy and gem_games.level_kwargs(game, 10) == hard


@pytest.mark.parametrize("game", ["GuessTheNumber", "Mastermind"])
@pytest.mark.parametrize("level", [1, 10])
def test_oracle_games_levels_1_and_10(game: str, level: int, play: Any) -> None:
    env = gymverse.make(f"gem-game:{game}", complexity=level)
    assert isinstance(env, gem_games.GemGame)
    transcript = play(env, 4)
    assert transcript[-1][2] is True and env.success_rule == "reward"
    assert env.gem_env.max_turns == gem_games.level_kwargs(game, level)["max_turns"]
    assert play(gymverse.make(f"gem-game:{game}", complexity=level), 4) == transcript


@pytest.mark.parametrize("game", sorted(gem_games.NO_ORACLE))
def test_games_without_oracle_play_randomly_and_replay(game: str, play: Any) -> None:
    def policy(env: gymverse.Env) -> str:
        return env.sample_random_action()

    firsts = []
    for level in (1, 10):
        transcript = play(gymverse.make(f"gem-game:{game}", complexity=level, seed=1), 3, policy)
        assert play(gymverse.make(f"gem-game:{game}", complexity=level, seed=1), 3, policy) == transcript
        firsts.append(transcript[0])
    assert firsts[0] != firsts[1]
    with pytest.raises(NotImplementedError, match="no oracle"):
        gymverse.make(f"gem-game:{game}").solve()
