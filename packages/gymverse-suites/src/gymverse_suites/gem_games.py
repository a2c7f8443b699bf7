r"""GEM's registry games (``gem-llm``) as ``gem-game:<Game>`` envs (``pip install 'gymverse-suites[gem]'``).

Core's `gymverse.compat.gem.GemEnvAdapter` runs each GEM env (private global RNG states, seeds passed through);
this module only picks the games, their complexity and their oracle.

* **Complexity.** GEM registers each game as ``-easy``/``-hard`` (and ``-random``) kwargs. Level 1 is the ``easy``
  kwargs, level 10 the ``hard`` ones, numeric kwargs interpolated in between (`gymverse.complexity.interpolate`);
  the GEM env is rebuilt at its level (the adapter's ``complexity_kwargs``).
* **Reward and success.** GEM's own (`LanguageGameReward`): success is the terminating step paying
  ``success_reward``; a step paying ``format_error_reward`` is flagged as a format error.
* **Oracle.** Only where GEM's state holds the answer: the secret number (GuessTheNumber) and code (Mastermind).
  The other games have none (`NO_ORACLE`): GEM ships no solver for them.
* **Left out** (`LEFT_OUT`): games that cannot run offline here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from gymverse.compat.gem import GemEnvAdapter, LanguageGameReward
from gymverse.complexity import LEVELS, interpolate
from gymverse.core import EnvMetadata
from gymverse.registry import register

from gymverse_suites._common import import_suite

FAMILY = "gem-game"  # not "gem": gymverse.loader reads "gem:<path>" refs as GEM env files

#: game -> (GEM entry point, kwargs at level 1 (GEM's ``-easy``), kwargs at level 10 (GEM's ``-hard``)).
GAMES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "GuessTheNumber": (
        "gem.envs.game_env.guess_the_number:GuessTheNumberEnv",
        {"min_number": 1, "max_number": 10, "max_turns": 4},
        {"min_number": 1, "max_number": 50, "max_turns": 7},
    ),
    "Mastermind": (
        "gem.envs.game_env.mastermind:MastermindEnv",
        {"code_length": 2, "num_numbers": 6, "max_turns": 10, "duplicate_numbers": False},
        {"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False},
    ),
    "Minesweeper": (
        "gem.envs.game_env.minesweeper:MinesweeperEnv",
        {"rows": 5, "cols": 5, "num_mines": 5, "max_turns": 25},
        {"rows": 8, "cols": 8, "num_mines": 12, "max_turns": 64},
    ),
    "FifteenPuzzle": (
        "gem.envs.game_env.fifteen_puzzle:FifteenPuzzleEnv",
        {"num_rows": 2, "max_turns": 10},
        {"num_rows": 4, "max_turns": 50},
    ),
    "Game2048": (
        "gem.envs.game_env.game_2048:Game2048Env",
        {"target_tile": 64, "max_turns": 50},
        {"target_tile": 512, "max_turns": 50},
    ),
}

#: GEM games not registered here, and why.
LEFT_OUT: dict[str, str] = {
    "Wordle, Hangman, WordSearch": "need nltk's `words` corpus, which nltk downloads at run time (no network here)",
    "Crosswords": "imports pandas, which gem-llm does not declare",
    "Sudoku, TowerofHanoi": "their sample_random_action() raises NotImplementedError (no random play to check)",
    "Sokoban": "its room generator takes seconds per reset at the hard size (10 s measured for -random)",
    "math:*, code:*, qa:*, eval:*, logic:RuleTaker-*": "load their data sets from the Hugging Face hub",
    "rg:*": "GEM's wrappers of reasoning-gym; use this package's rg: envs (the same tasks, with complexity)",
}

_ORACLES: dict[str, Callable[[Any], str]] = {
    "GuessTheNumber": lambda gem: "\\boxed{" + str(gem.game_number) + "}",
    "Mastermind": lambda gem: "\\boxed{" + " ".join(map(str, gem.game_code)) + "}",
}
NO_ORACLE = frozenset(GAMES) - frozenset(_ORACLES)


def level_kwargs(game: str, level: int) -> dict[str, Any]:
    """GEM constructor kwargs of `game` at complexity `level` (numbers interpolated from easy to hard)."""
    _, easy, hard = GAMES[game]
    out: dict[str, Any] = {}
    for name, low in easy.items():
        high = hard[name]
        numeric = isinstance(low, int | float) and not isinstance(low, bool)
        out[name] = interpolate(low, high, level) if numeric else low
    if game == "Game2048":  # tiles are powers of two: snap to the nearest one not above
        out["target_tile"] = 1 << (int(out["target_tile"]).bit_length() - 1)
    return out


class GemGame(GemEnvAdapter):
    """A GEM registry game with a complexity table (and an oracle where GEM's state holds the answer)."""

    def __init__(self, game: str, **kwargs: Any) -> None:
        entry, _, _ = GAMES[game]
        module, _, attr = entry.partition(":")
        factory = getattr(import_suite(module, "gem"), attr)
        reward = import_suite("gem.utils.constants", "gem").LanguageGameReward
        super().__init__(
            factory=factory,
            complexity_kwargs=functools.partial(level_kwargs, game),
            name=game,
            family=FAMILY,
            domain="other",
            success_from="reward",
            success_reward=float(reward.success_reward),
            format_error_reward=float(reward.format_error_reward),
            **kwargs,
        )
        self.game = game

    def solve(self) -> str:
        """The answer read off the GEM game's state (GuessTheNumber, Mastermind); other games have no oracle."""
        oracle = _ORACLES.get(self.game)
        if oracle is None:
            raise NotImplementedError(f"gem-game:{self.game} has no oracle: GEM ships no solver for it")
        return oracle(self.gem_env)


def complexity_table(game: str) -> Mapping[int, dict[str, Any]]:
    """The GEM kwargs at every level, for docs."""
    return {level: level_kwargs(game, level) for level in LEVELS}


@functools.cache
def game_class(game: str) -> type[GemGame]:
    """`GemGame` for `game`, declaring the kwargs that change with the level as its complexity params."""
    if game not in GAMES:
        raise ValueError(f"unknown GEM game {game!r}; known: {', '.join(GAMES)}")
    table = complexity_table(game)
    params = {k: [table[lvl][k] for lvl in LEVELS] for k in table[1] if table[1][k] != table[10][k]}
    metadata = EnvMetadata(  # a class attribute (the adapter's is per instance): tools read it off the class
        name=game,
        family=FAMILY,
        domain="other",  # GymVerse's domains name its own families (synth seeds its "game" domain from them)
        description=f"GEM's {game} game (gem-llm), easy at level 1 to hard at level 10",
        action_format="free text, parsed by the GEM env (its prompt asks for \\boxed{...})",
        max_turns=int(table[10]["max_turns"]),
        reward_range=(LanguageGameReward.format_error_reward, LanguageGameReward.success_reward),
        extra={"source": "gem", "gem_entry_point": GAMES[game][0]},
    )
    attrs = {"complexity_params": params, "metadata": metadata, "__init__": _bind_game(game)}
    return type(f"Gem_{game}", (GemGame,), attrs)


def _bind_game(game: str) -> Callable[..., None]:
    def __init__(self: GemGame, **kwargs: Any) -> None:
        GemGame.__init__(self, game, **kwargs)

    return __init__


def __getattr__(name: str) -> Any:
    # ``gymverse_suites.gem_games:Gem_<Game>`` entry points: the class is made on first use
    if name.startswith("Gem_") and name[4:] in GAMES:
        return game_class(name[4:])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_envs() -> None:
    """Register ``gem-game:<Game>`` for every game in `GAMES`."""
    for game in GAMES:
        register(f"{FAMILY}:{game}", f"{__name__}:Gem_{game}")
