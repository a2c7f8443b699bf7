"""Built-in environments. Importing this module registers every built-in family with `gymverse.registry`.

Each domain module registers its own ids; keep this file a plain list of imports.
"""

from gymverse.envs import game  # noqa: F401
