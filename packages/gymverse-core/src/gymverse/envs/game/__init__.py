"""Game-domain built-in environments."""

from gymverse.registry import register

register("games:GuessTheNumber", "gymverse.envs.game.guess_number:GuessTheNumber")
