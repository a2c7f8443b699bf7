"""Game-domain built-in environments."""

from gymverse.registry import register

register("game:GuessTheNumber", "gymverse.envs.game.guess_number:GuessTheNumber")
register("game:Mastermind", "gymverse.envs.game.mastermind:Mastermind")
register("game:LightsOut", "gymverse.envs.game.lights_out:LightsOut")
register("game:TowerOfHanoi", "gymverse.envs.game.hanoi:TowerOfHanoi")
register("game:Minesweeper", "gymverse.envs.game.minesweeper:Minesweeper")
