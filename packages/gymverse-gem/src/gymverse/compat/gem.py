r"""GEM interop: run any object with GEM's ``reset/step`` contract, or a GEM-style env file, as a GymVerse `Env`.

GEM (pypi ``gem-llm``) envs subclass ``gem.core.Env``: ``reset(seed=None) -> (obs, info)``,
``step(action) -> (obs, reward, terminated, truncated, info)``, ``sample_random_action()``. Two differences from
GymVerse matter and are handled explicitly here:

* **Success.** GEM has no success flag; many envs only return ``LanguageGameReward.success_reward`` on the winning
  step. `GemEnvAdapter` takes ``info["success"]`` when the GEM env reports it. Inferring success from the reward
  is a heuristic and is off by default: pass ``success_from="reward"`` (terminating step with reward ==
  `success_reward`), ``"info_or_reward"`` (info when present, else the reward rule) or a callable.
* **Randomness.** GEM envs draw from the *global* ``random`` / ``numpy.random`` and ``reset(seed)`` reseeds them.
  With ``isolate_global_rng=True`` (default) the adapter gives each instance private global-generator states,
  swapped in around every call into the GEM object (under a process-wide lock) and swapped out afterwards: the
  caller's global generators are untouched, same seed + same actions gives the same transcript, and
  `get_state`/`clone` branch the GEM randomness too. ``reset(seed=s)`` passes `s` to the GEM env unchanged (same
  episode as calling GEM directly); ``reset()`` passes a seed drawn from the adapter's own RNG.

Complexity: GEM has no level API, but LLM-written GEM-style files take one by convention (`gem_conventions`): a
``complexity=`` constructor keyword, a ``complexity`` attribute read at reset, or an ``evolve``/``set_complexity``
method. With ``complexity_knob`` (``"auto"`` in `load_gem_env_file`) a fresh env is built at its level the way the
file expects, and `set_complexity` changes the *live* GEM object at the next reset the way a trainer does at run
time (method, else attribute) without rebuilding it, so an env that derives its parameters only in ``__init__``
shows up as a run-time no-op. Alternatively pass ``complexity_kwargs={level: constructor_kwargs}`` (a level
without an entry uses the nearest lower entry, or the lowest one) or a callable ``level -> kwargs``, together with
a `factory`; the GEM object is rebuilt at the first reset after the level changes. Without either the complexity
is *fixed*: `set_complexity` is recorded (curricula keep working) but changes nothing, and every reset/step info
says ``complexity_fixed: True`` so evaluations can tell.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np

from gymverse.compat import gem_conventions as conv
from gymverse.compat._gem_shim import LanguageGameReward, gem_modules
from gymverse.complexity import check_level
from gymverse.core import Domain, Env, EnvMetadata, StepResult
from gymverse.global_rng import GlobalRngScope

SuccessRule = str | Callable[[Any, float, bool, bool, Mapping[str, Any]], bool]
ComplexityKwargs = Mapping[int, Mapping[str, Any]] | Callable[[int], Mapping[str, Any]]
_RULES = ("info", "reward", "info_or_reward")


class GemLoadError(RuntimeError):
    """A GEM env (file) could not be loaded or built."""


class GemEnvAdapter(Env):
    """Run a GEM env (any object with GEM's ``reset``/``step`` contract) as a GymVerse `Env`.

    Args:
        obj: a built GEM env; or None together with `factory`.
        factory: builds the GEM env from keyword arguments (e.g. its class); needed for `complexity_kwargs`.
        kwargs: constructor kwargs for `factory` (merged under the per-level kwargs).
        complexity_kwargs: level -> extra constructor kwargs (mapping or callable); see the module docstring.
        name, family, domain, description: metadata (defaults: the GEM class name, ``"gem"``, ``"other"``).
        success_from: ``"info"`` (default), ``"reward"``, ``"info_or_reward"``, a rule text such as
            ``"reward>=1"`` (`gem_conventions.parse_success_rule`) or ``f(obs, reward, terminated, truncated, info)``.
        success_reward: the reward that counts as success for the reward rule (GEM's default 1.0).
        format_error_reward: when set (e.g. ``LanguageGameReward.format_error_reward``), a step with exactly this
            reward is marked ``info["format_error"] = True`` so format-error statistics cover GEM envs; off by
            default because the reward alone cannot tell a format error from an ordinary penalty.
        complexity_knob: how the GEM class takes complexity (``kwarg``, ``attribute``, ``method:evolve``,
            ``method:set_complexity``, ``auto`` to detect it from the factory class, None: fixed).
        reward_range: the env's declared reward range (default: GEM's format-error reward to `success_reward`).
        isolate_global_rng: give the GEM code private global-generator states (see the module docstring).
        use_shim: serve the ``gem`` shim while GEM code runs (set by `load_gem_env_file`; None: never).
        complexity, seed, max_turns: as for `Env`; `max_turns` defaults to the GEM object's ``max_turns``.
    """

    def __init__(
        self,
        obj: Any = None,
        *,
        factory: Callable[..., Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        complexity_kwargs: ComplexityKwargs | None = None,
        name: str | None = None,
        family: str = "gem",
        domain: Domain = "other",
        description: str | None = None,
        success_from: SuccessRule = "info",
        success_reward: float = LanguageGameReward.success_reward,
        format_error_reward: float | None = None,
        complexity_knob: str | None = None,
        reward_range: tuple[float, float] | None = None,
        isolate_global_rng: bool = True,
        use_shim: bool | None = None,
        complexity: int = 1,
        seed: int | None = None,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(complexity=complexity, seed=seed, max_turns=max_turns)
        if (obj is None) == (factory is None):
            raise ValueError("pass exactly one of obj (a built GEM env) or factory (to build one)")
        if complexity_kwargs is not None and factory is None:
            raise ValueError("complexity_kwargs needs a factory to rebuild the GEM env at a new level")
        if not callable(success_from) and success_from not in _RULES:
            try:
                success_from = conv.parse_success_rule(success_from)
            except ValueError:
                raise ValueError(
                    f"success_from must be one of {_RULES}, a rule like 'reward>=1' or a callable, got {success_from!r}"
                ) from None
        if complexity_knob is not None and complexity_kwargs is not None:
            raise ValueError("pass complexity_knob or complexity_kwargs, not both")
        if complexity_knob == "auto":
            complexity_knob = conv.complexity_knob(factory) if isinstance(factory, type) else None
            self._detect_attribute = complexity_knob is None
        else:
            self._detect_attribute = False
        if isinstance(complexity_kwargs, Mapping):
            if not complexity_kwargs:
                raise ValueError("complexity_kwargs is empty; give kwargs for at least one level")
            complexity_kwargs = {check_level(k): dict(v) for k, v in complexity_kwargs.items()}
        self._factory = factory
        self._kwargs = dict(kwargs or {})
        self._complexity_kwargs = complexity_kwargs
        self._knob = complexity_knob
        self._success_from = success_from
        self._success_reward = float(success_reward)
        self._format_error_reward = None if format_error_reward is None else float(format_error_reward)
        self._use_shim = use_shim
        self._rng_scope = GlobalRngScope(int(self.rng.integers(0, 2**32 - 1))) if isolate_global_rng else None
        self._reset_seed: int | None = None
        #: False when the GEM code cannot reach NumPy's global generator outside reset (set by the file loader).
        self.gem_uses_numpy = True
        #: Where the success rule came from (``given``, ``inferred ...``, ``none inferred ...``).
        self.success_rule_note = "given"
        #: The same as a field decisions may read: ``given``, ``inferred`` or ``none`` (no success signal found).
        self.success_rule_source = "given"
        self._built_level: int | None = None
        self._gem = obj if obj is not None else self._build(self._level)
        if self._detect_attribute and isinstance(getattr(self._gem, "complexity", None), int | float):
            self._knob = "attribute"  # found only on an instance: set before reset from now on
            self._apply_live(self._level)
        if not isinstance(getattr(type(self), "metadata", None), EnvMetadata):
            # derived from the GEM object; a subclass that declares its metadata on the class (so tools can read it
            # without building an env, as gymverse_suites' GEM games do) keeps that one
            self.metadata = self._derived_metadata(name, family, domain, description, reward_range)

    def _derived_metadata(
        self,
        name: str | None,
        family: str,
        domain: Domain,
        description: str | None,
        reward_range: tuple[float, float] | None,
    ) -> EnvMetadata:
        cls_name = type(self._gem).__name__
        doc = (type(self._gem).__doc__ or "").strip().splitlines()
        return EnvMetadata(
            name=name or cls_name,
            family=family,
            domain=domain,
            description=description or (doc[0] if doc else f"GEM environment {cls_name}"),
            action_format="free text, parsed by the GEM env",
            max_turns=100,
            reward_range=reward_range or (LanguageGameReward.format_error_reward, self._success_reward),
            extra={"source": "gem", "gem_class": f"{type(self._gem).__module__}.{cls_name}"},
        )

    # ----------------------------------------------------------------- plumbing
    @contextmanager
    def _gem_call(self, seeding: bool = False) -> Iterator[None]:
        numpy = seeding or self.gem_uses_numpy
        rng = self._rng_scope.active(numpy) if self._rng_scope is not None else nullcontext()
        mods = gem_modules(True) if self._use_shim else nullcontext()
        with mods, rng:
            yield

    def _level_kwargs(self, level: int) -> dict[str, Any]:
        ck = self._complexity_kwargs
        if ck is None:
            return {}
        if callable(ck):
            extra = ck(level)
            if not isinstance(extra, Mapping):
                raise TypeError(f"complexity_kwargs({level}) returned {type(extra).__name__}, expected a mapping")
            return dict(extra)
        keys = sorted(ck)
        below = [k for k in keys if k <= level]
        return dict(ck[below[-1] if below else keys[0]])

    def _build(self, level: int) -> Any:
        assert self._factory is not None
        kwargs = {**self._kwargs, **self._level_kwargs(level)}
        if self._knob == "kwarg":
            kwargs["complexity"] = level
        fname = getattr(self._factory, "__name__", repr(self._factory))
        try:
            with self._gem_call(seeding=True):
                obj = self._factory(**kwargs)
                if self._knob is not None and self._knob != "kwarg":
                    conv.apply_level(obj, level)
        except Exception as err:
            raise GemLoadError(f"building {fname}(**{kwargs!r}) failed: {type(err).__name__}: {err}") from err
        self._built_level = level
        return obj

    def _apply_live(self, level: int) -> None:
        with self._gem_call():
            conv.apply_level(self._gem, level)
        self._built_level = level

    # ----------------------------------------------------------------- properties
    @property
    def gem_env(self) -> Any:
        """The wrapped GEM object (live)."""
        return self._gem

    @property
    def complexity_fixed(self) -> bool:
        """True when levels do not reach the GEM env (no complexity knob, no `complexity_kwargs`)."""
        return self._complexity_kwargs is None and self._knob is None

    @property
    def success_rule(self) -> str:
        """The success rule in use as text (``info``, ``reward``, ``reward>=1``, ``callable``)."""
        rule = self._success_from
        if isinstance(rule, conv.RewardRule | str):
            return str(rule)
        return "callable"

    @property
    def complexity_knob(self) -> str | None:
        """How levels reach the GEM env: ``kwarg``, ``attribute``, ``method:...``, ``kwargs-table`` or None."""
        return "kwargs-table" if self._complexity_kwargs is not None else self._knob

    @property
    def max_turns(self) -> int:
        """Constructor override, else the GEM object's ``max_turns``, else 100 (GEM envs end episodes themselves)."""
        if self._max_turns_override is not None:
            return self._max_turns_override
        gem_max = getattr(self._gem, "max_turns", None)
        if isinstance(gem_max, int | np.integer) and not isinstance(gem_max, bool) and gem_max > 0:
            return int(gem_max)
        return self.metadata.max_turns

    # ----------------------------------------------------------------- episode API
    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; an explicit `seed` is also the GEM env's seed."""
        self._reset_seed = seed
        return super().reset(seed=seed)

    def _reset(self) -> tuple[str, dict[str, Any]]:
        if self._complexity_kwargs is not None and self._built_level != self._level:
            self._gem = self._build(self._level)
        elif self._knob is not None and self._built_level != self._level:
            self._apply_live(self._level)  # what a trainer does to a live env: no rebuild
        gem_seed = self._reset_seed if self._reset_seed is not None else int(self.rng.integers(0, 2**31 - 1))
        with self._gem_call(seeding=True):
            if self._rng_scope is not None:
                # GEM envs that ignore the seed still get reproducible global generators.
                random.seed(gem_seed)
                np.random.seed(gem_seed % 2**32)  # noqa: NPY002
            obs, info = self._gem.reset(seed=gem_seed)
        out = dict(info) if isinstance(info, Mapping) else {"gem_info": info}
        out["gem_seed"] = gem_seed
        out["complexity_fixed"] = self.complexity_fixed
        return str(obs), out

    def _step(self, action: str) -> StepResult:
        with self._gem_call():
            obs, reward, terminated, truncated, info = self._gem.step(action)
        out = dict(info) if isinstance(info, Mapping) else {"gem_info": info}
        out["complexity_fixed"] = self.complexity_fixed
        reward = float(reward)
        if self._format_error_reward is not None and math.isclose(reward, self._format_error_reward, abs_tol=1e-9):
            out["format_error"] = True
        if terminated or truncated:
            out["success"], out["success_source"] = self._judge(obs, reward, bool(terminated), bool(truncated), out)
        return StepResult(str(obs), reward, bool(terminated), bool(truncated), out)

    def _judge(
        self, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]
    ) -> tuple[bool, str]:
        rule = self._success_from
        if callable(rule):
            source = str(rule) if isinstance(rule, conv.RewardRule) else "callable"
            return bool(rule(obs, reward, terminated, truncated, info)), source
        if rule in ("info", "info_or_reward") and "success" in info:
            return bool(info["success"]), "info"
        if rule in ("reward", "info_or_reward"):
            hit = terminated and math.isclose(reward, self._success_reward, rel_tol=0.0, abs_tol=1e-9)
            return hit, "reward"
        return False, "none"

    def solve(self) -> str:
        """The GEM object's ``solve()`` if it has one; GEM envs usually have no oracle."""
        fn = getattr(self._gem, "solve", None)
        if not callable(fn):
            raise NotImplementedError(f"{self.metadata.name} (GEM) has no oracle: the GEM env defines no solve()")
        with self._gem_call():
            return str(fn())

    def sample_random_action(self) -> str:
        """The GEM env's random action; NotImplementedError (saying so) when it defines none."""
        fn = getattr(self._gem, "sample_random_action", None)
        if not callable(fn):
            raise NotImplementedError(f"{self.metadata.name} (GEM) defines no sample_random_action()")
        try:
            with self._gem_call():
                return str(fn())
        except NotImplementedError as err:
            raise NotImplementedError(
                f"{self.metadata.name} (GEM): sample_random_action() raises NotImplementedError {err}".rstrip()
            ) from err

    def close(self) -> None:
        """Close the GEM object if it can be closed."""
        fn = getattr(self._gem, "close", None)
        if callable(fn):
            with self._gem_call():
                fn()

    def __repr__(self) -> str:
        return f"<GemEnvAdapter {self.metadata.name} complexity={self.complexity}>"


__all__ = ["GemEnvAdapter", "GemLoadError", "LanguageGameReward", "SuccessRule"]
