"""GymVerse inside verl 0.9.1: a multi-turn agent loop, PERPO advantages and complexity evolution.

Importing this package does not import verl; `gymverse_verl.plugin` (loaded by ``import verl`` through the
``verl.plugins`` entry point) registers the agent loop, the advantage estimator and the trainer.
"""

AGENT_NAME = "gymverse_agent"
ADV_ESTIMATOR = "gymverse_perpo"
TRAINER_MODE = "gymverse_sync"
CURRICULUM_ACTOR = "gymverse_curriculum"  # base name; each run's actor is this plus its Ray job id
EXTRA_KEY = "gymverse"  # the agent loop's ``extra_fields[EXTRA_KEY]``: the episode's `EpisodeRecord.to_dict()`

__version__ = "0.1.0"

__all__ = ["ADV_ESTIMATOR", "AGENT_NAME", "CURRICULUM_ACTOR", "EXTRA_KEY", "TRAINER_MODE", "__version__"]
