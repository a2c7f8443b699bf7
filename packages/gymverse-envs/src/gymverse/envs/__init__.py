"""Built-in environments. Importing this module registers every built-in family with `gymverse.registry`.

Each domain package registers its own ids in its ``__init__``; keep this file a plain list of imports.
"""

from gymverse.envs import algorithm, game, logic, tooluse  # noqa: F401
