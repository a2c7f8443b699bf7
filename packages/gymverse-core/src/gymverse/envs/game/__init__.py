"""Game-domain built-in environments."""

from gymverse.registry import register

register("games:GuessTheNumber", "gymverse.envs.game.guess_number:GuessTheNumber")
register("games:Mastermind", "gymverse.envs.game.mastermind:Mastermind")
register("games:LightsOut", "gymverse.envs.game.lights_out:LightsOut")
register("games:TowerOfHanoi", "gymverse.envs.game.hanoi:TowerOfHanoi")
register("games:Minesweeper", "gymverse.envs.game.minesweeper:Minesweeper")
