"""``verl.plugins`` entry point, imported by ``import verl`` in every process: registers the agent loop, the
advantage estimator and the trainer; verl swallows plugin errors, so each failure is logged here as a warning."""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger(__name__)

PARTS = ("gymverse_verl.agent_loop", "gymverse_verl.advantage", "gymverse_verl.trainer")
REGISTERED: dict[str, bool] = {}


def register_all() -> dict[str, bool]:
    """Import every part (idempotent); returns which parts registered."""
    for name in PARTS:
        if REGISTERED.get(name):
            continue
        try:
            importlib.import_module(name)
            REGISTERED[name] = True
        except Exception as exc:  # a missing optional verl piece must not break `import verl`
            REGISTERED[name] = False
            logger.warning("GymVerse could not register %s with verl: %s: %s", name, type(exc).__name__, exc)
    return dict(REGISTERED)


register_all()
