"""Value-level rules of the env contract, shared by the checker (trusted side) and the sandbox's env host.

The host applies them to an env it runs (an instance's state, a step's types) and the checker judges with the same
definitions, so the two sides can never disagree about what "the same value" or "a well-typed step" means.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from gymverse.protocol import EnvLike

#: Attributes every `Env` owns for bookkeeping; the rest of ``vars(env)`` is the generated instance.
BASE_ATTRS = frozenset(
    {"_level", "_pending_level", "_seed", "rng", "_max_turns_override", "params", "turn", "done", "_needs_reset"}
    | {"spec_id"}
)
#: Guard for envs whose turn budget is absurd; the per-episode limit never exceeds it unless `max_steps` says so.
STEP_CAP = 10_000

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def canon(obj: Any, depth: int = 0, _stack: frozenset[int] = frozenset()) -> Any:
    """A comparable, JSON-like form of `obj` (numpy values unboxed, object addresses removed from reprs)."""
    if obj is None or isinstance(obj, bool | str | int):
        return obj
    if isinstance(obj, float):
        return "nan" if math.isnan(obj) else obj
    if depth > 12 or id(obj) in _stack:  # cycles and absurd nesting: the type is all we compare
        return f"<{type(obj).__qualname__}>"
    stack = _stack | {id(obj)}
    if isinstance(obj, np.generic):
        return canon(obj.item(), depth + 1, stack)
    if isinstance(obj, np.ndarray):
        return ["ndarray", str(obj.dtype), list(obj.shape), canon(obj.tolist(), depth + 1, stack)]
    if isinstance(obj, Mapping):
        items = sorted(obj.items(), key=lambda kv: repr(kv[0]))
        return {str(k): canon(v, depth + 1, stack) for k, v in items}
    if isinstance(obj, list | tuple):
        return [canon(v, depth + 1, stack) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted((canon(v, depth + 1, stack) for v in obj), key=repr)
    if isinstance(obj, np.random.Generator):
        return canon(obj.bit_generator.state, depth + 1, stack)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return [type(obj).__qualname__, canon(vars(obj), depth + 1, stack)]
    return _ADDR.sub("", repr(obj))


def step_limit(env: EnvLike, max_steps: int | None) -> int:
    """How many steps an episode may take before the checker gives up on it."""
    if max_steps is not None:
        return max_steps
    return min(max(int(env.max_turns), int(env.metadata.max_turns)), STEP_CAP) + 1


def reward_in_range(reward: float, low: float, high: float) -> bool:
    """A reward inside the declared ``(low, high)`` range, with float rounding forgiven."""
    return low - 1e-9 <= reward <= high + 1e-9


def step_type_problem(res: object) -> str | None:
    """Why `res` is not a well-typed step result, or None."""
    if not isinstance(res, tuple) or len(res) != 5:
        return f"step() returned {type(res).__name__}, expected a 5-field StepResult"
    obs, reward, terminated, truncated, info = res
    if not isinstance(obs, str):
        return f"observation is {type(obs).__name__}, expected str"
    if isinstance(reward, bool) or not isinstance(reward, int | float | np.number):
        return f"reward is {type(reward).__name__}, expected float"
    if not math.isfinite(float(reward)):
        return f"reward is {reward!r}, expected a finite number"
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, bool | np.bool_):
            return f"{name} is {type(flag).__name__}, expected bool"
    if not isinstance(info, dict):
        return f"info is {type(info).__name__}, expected dict"
    return None
