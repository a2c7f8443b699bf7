"""Env checker: Gymnasium's env checker for text envs with complexity levels.

``check_env(target)`` builds the env at several complexity levels and seeds and checks the whole contract of
`gymverse.core.Env`: construction, reset/step types, reward range, termination, determinism, the oracle,
malformed actions, state snapshots and clones, wrapper-forwarded complexity, metadata and complexity params, and
that the global RNGs stay untouched. A broken env yields failed `CheckResult`s, never an exception; only a target
that cannot be resolved raises `CheckTargetError`.
"""

from gymverse.checker.report import CheckReport, CheckResult
from gymverse.checker.runner import CHECK_NAMES, check_env
from gymverse.checker.target import CheckTargetError, resolve_target

__all__ = ["CHECK_NAMES", "CheckReport", "CheckResult", "CheckTargetError", "check_env", "resolve_target"]
