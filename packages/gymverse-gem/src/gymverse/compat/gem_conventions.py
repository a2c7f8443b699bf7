r"""The conventions of GEM-style env files as LLMs write them, read from the source or the class.

* **Which class.** Files often define a base env and a ``...WithFeedback`` variant subclassing it: the *base* env
  (a root of the file's env-class tree) is the default; every env class can be named.
* **Complexity knob.** ``complexity=`` in the constructor, a ``complexity`` attribute read at reset, or an
  ``evolve(level)`` / ``set_complexity(level)`` method (`complexity_knob`).
* **Success and reward range.** GEM envs signal success by reward (``1`` or ``LanguageGameReward.success_reward``
  on the terminating step; wrong answers often ``-1``, format errors ``-0.1``), rarely by ``info["success"]``.
  `infer_reward_conventions` reads the rewards ``step`` returns from the AST; `RewardRule` is a success rule such
  as ``reward>=1`` (also parsed from the ``--success-rule`` text).
* **Python version and packages.** `source_problem` names the exact cause when a file cannot even be imported
  here: syntax that needs a newer Python (3.12 f-strings) or a package that is not installed.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import math
import operator
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gymverse.compat._gem_shim import LanguageGameReward

#: Methods that change a live env's complexity, in the order they are tried.
KNOB_METHODS = ("set_complexity", "evolve")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9),
}
_RULE_RE = re.compile(r"^\s*reward\s*(>=|==|>)\s*(-?\d+(?:\.\d*)?|-?\.\d+)\s*$")


@dataclass(frozen=True)
class RewardRule:
    """Success = the episode terminated on a step whose reward satisfies ``reward OP value`` (e.g. ``reward>=1``)."""

    op: str
    value: float

    def __str__(self) -> str:
        return f"reward{self.op}{self.value:g}"

    def __call__(self, obs: Any, reward: float, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> bool:
        """Judge one final step."""
        return bool(terminated) and _OPS[self.op](float(reward), self.value)


def parse_success_rule(text: str) -> RewardRule | str:
    """``reward>=1`` / ``reward==1`` / ``reward>0`` -> `RewardRule`; ``info`` -> ``"info"``; ValueError otherwise."""
    t = text.strip()
    if t in ("info", "info.success", 'info["success"]'):
        return "info"
    m = _RULE_RE.match(t)
    if m is None:
        raise ValueError(f"bad success rule {text!r}: expected e.g. 'reward>=1', 'reward==1' or 'info'")
    return RewardRule(m.group(1), float(m.group(2)))


# ------------------------------------------------------------------------------------------------ class picking
def env_classes(module_vars: Mapping[str, Any], module_name: str) -> list[type]:
    """Concrete classes defined in the module (in definition order) that have callable ``reset`` and ``step``."""
    return [
        c for c in module_vars.values()
        if isinstance(c, type) and c.__module__ == module_name and callable(getattr(c, "reset", None))
        and callable(getattr(c, "step", None)) and not inspect.isabstract(c)
    ]  # fmt: skip


def base_class(classes: list[type]) -> type:
    """The default env of a file: the first root of its env-class tree (one no other env class there derives from)."""
    roots = [c for c in classes if not any(o is not c and issubclass(c, o) for o in classes)]
    plain = [c for c in roots if not c.__name__.endswith("WithFeedback")]
    return (plain or roots or classes)[0]


def class_names_in_source(source: str) -> list[str]:
    """Top-level classes that define or inherit (within the file) ``reset`` and ``step``, or subclass an ``Env``."""
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def base_names(node: ast.ClassDef) -> list[str]:
        return [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]

    def methods(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        node = classes.get(name)
        if node is None or name in seen:
            return set()
        own = {f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        for base in base_names(node):
            own |= methods(base, seen | {name})
        return own

    def env_based(name: str, seen: frozenset[str] = frozenset()) -> bool:
        node = classes.get(name)
        if node is None or name in seen:
            return False
        return any(b == "Env" or env_based(b, seen | {name}) for b in base_names(node))

    return [n for n in classes if {"reset", "step"} <= methods(n) or (env_based(n) and methods(n) & {"reset", "step"})]


# ------------------------------------------------------------------------------------------------ complexity knob
def _takes_kwarg(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def knob_method(cls: type) -> str | None:
    """The name of the class's own ``set_complexity``/``evolve`` method, if it defines one."""
    for name in KNOB_METHODS:
        for klass in cls.__mro__:
            if klass.__module__.startswith(("gem.", "gymverse.")) or klass is object:
                break
            if name in vars(klass) and callable(vars(klass)[name]):
                return name
    return None


def complexity_knob(cls: type, instance: Any | None = None) -> str | None:
    """How a GEM class takes complexity: ``kwarg``, ``method:evolve``/``method:set_complexity``, ``attribute``.

    The constructor keyword wins for building fresh; `apply_level` handles changing a live instance.
    """
    if _takes_kwarg(cls.__init__, "complexity"):  # type: ignore[misc]
        return "kwarg"
    method = knob_method(cls)
    if method is not None:
        return f"method:{method}"
    if instance is not None and isinstance(getattr(instance, "complexity", None), int | float):
        return "attribute"
    return None


def apply_level(obj: Any, level: int) -> str:
    """Change a live GEM env's complexity the way a trainer does at run time; returns how it was done."""
    method = knob_method(type(obj))
    if method is not None:
        fn = getattr(obj, method)
        try:
            params = [p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
        except (TypeError, ValueError):
            params = [None]  # type: ignore[list-item]
        if params:
            fn(level)
        else:  # evolve() with no argument: one step up per call
            for _ in range(10):
                if int(getattr(obj, "complexity", level)) >= level:
                    break
                fn()
        return f"method:{method}"
    obj.complexity = level
    return "attribute"


# ------------------------------------------------------------------------------------------------ rewards
@dataclass(frozen=True)
class RewardConventions:
    """Rewards a file's ``step`` methods return: the inferred success rule and reward range (None when unknown)."""

    values: tuple[float, ...]
    declared_range: tuple[float, float] | None = None
    info_success: bool = False

    @property
    def success_rule(self) -> RewardRule | str | None:
        """``info_or_reward`` when the env sets ``info["success"]``, else ``reward>=max positive reward``, else None."""
        if self.info_success:
            return "info_or_reward"
        top = max(self.values, default=0.0)
        return RewardRule(">=", top) if top > 0 else None

    @property
    def reward_range(self) -> tuple[float, float] | None:
        """The declared ``reward_range``, else the span of the rewards returned (with 0)."""
        if self.declared_range is not None:
            return self.declared_range
        if not self.values:
            return None
        lo, hi = min((*self.values, 0.0)), max((*self.values, 0.0))
        return (lo, hi) if lo < hi else None


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "LanguageGameReward":
        value = getattr(LanguageGameReward, node.attr, None)
        return float(value) if isinstance(value, int | float) else None
    return None


def _numbers(node: ast.expr) -> list[float]:
    if isinstance(node, ast.IfExp):
        return _numbers(node.body) + _numbers(node.orelse)
    n = _number(node)
    return [] if n is None else [n]


def infer_reward_conventions(source: str, class_names: list[str] | None = None) -> RewardConventions:
    """Rewards in ``return obs, REWARD, ...`` and ``reward = ...`` of ``step`` methods (of `class_names`, or all)."""
    tree = ast.parse(source)
    values: list[float] = []
    declared: tuple[float, float] | None = None
    info_success = False
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if class_names is not None and cls.name not in class_names:
            continue
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "reward_range" for t in node.targets):
                with contextlib.suppress(ValueError, TypeError, SyntaxError):
                    lo, hi = ast.literal_eval(node.value)
                    declared = (float(lo), float(hi))
        for step in (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "step"):
            for node in ast.walk(step):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 5:
                    values += _numbers(node.value.elts[1])
                elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any("reward" in getattr(t, "id", "") for t in targets):
                        values += _numbers(node.value)
                if isinstance(node, ast.Constant) and node.value == "success":
                    info_success = True
    return RewardConventions(tuple(sorted(set(values))), declared, info_success)


# ------------------------------------------------------------------------------------------------ file problems
def _needs_newer_python(source: str, err: SyntaxError) -> bool:
    if sys.version_info >= (3, 12) or not str(err.msg).startswith("f-string"):
        return False
    line = source.splitlines()[(err.lineno or 1) - 1] if err.lineno else ""
    # PEP 701 (3.12): the quote of the f-string reused inside {...}, backslashes or comments in replacement fields
    return bool(re.search(r"""f(["']).*\{[^}]*(\1|\\|#)""", line))


def source_problem(source: str) -> str | None:
    """One line naming why this source cannot run here (newer-Python syntax, missing package), or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        where = f"line {err.lineno}"
        if _needs_newer_python(source, err):
            return (
                f"needs Python >= 3.12: {where} uses an f-string with nested quotes/backslashes "
                f"(PEP 701), a syntax error on Python {sys.version_info.major}.{sys.version_info.minor}"
            )
        return f"syntax error at {where}: {err.msg}"
    for node in tree.body:
        roots: list[tuple[str, int]] = []
        if isinstance(node, ast.Import):
            roots = [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots = [(node.module.split(".")[0], node.lineno)]
        for root, lineno in roots:
            if root == "gem":
                continue  # served by GymVerse's stand-in when gem-llm is missing
            try:
                found = importlib.util.find_spec(root) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                return f"needs the package {root!r}, which is not installed (import at line {lineno})"
    return None


__all__ = [
    "KNOB_METHODS",
    "RewardConventions",
    "RewardRule",
    "apply_level",
    "base_class",
    "class_names_in_source",
    "complexity_knob",
    "env_classes",
    "infer_reward_conventions",
    "knob_method",
    "parse_success_rule",
    "source_problem",
]
