"""Established text-agent suites as GymVerse envs: reasoning-gym (``rg:``), GEM games (``gem-game:``), BabyAI
(``babyai:``), TextCraft (``textcraft:``), TextWorld (``textworld:``), ScienceWorld (``sciworld:``), and any
AgentGym env server (``agentgym+http://host:port/<env>``).

Each suite is an optional extra (``pip install 'gymverse-suites[rg]'``); its envs are registered through the
``gymverse.envs`` entry point only when its package is installed.
"""

from gymverse_suites.registration import SUITES, installed_suites

__all__ = ["SUITES", "installed_suites"]
