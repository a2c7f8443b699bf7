"""`CurriculumOptions`: the curriculum knobs of a training run, one name each, for every adapter and `gymverse train`.

Each adapter maps its own config system onto these names (verl: ``+gymverse.evolve=true``; RL2:
``gymverse.evolve=true``; OpenRLHF: ``--gymverse.evolve``; oat: ``--evolve``) and builds the one
`CurriculumState` from `to_config`. String values from command lines go through `CurriculumOptions.parse`.

=============== ======= =======================================================================================
knob            default meaning
=============== ======= =======================================================================================
evolve          false   PERPO complexity evolution (promote after ``patience`` steps at ``>= promote_at``
                        success, demote after ``patience`` steps at ``<= demote_at``)
initial_level   1       every env's starting level
promote_at      0.8
demote_at       0.1
patience        3
max_turns       none    turn cap per episode (the env's own budget still holds)
horizon         ""      turn-cap schedule: ``"8"`` (fixed) or ``"10,20,30"`` (stepwise, every
                        ``horizon_interval`` training steps); overrides ``max_turns``
horizon_interval 100
eval_level      none    level of validation episodes (default: ``initial_level``)
eval_max_turns  none    turn cap of validation episodes (default: ``max_turns``)
=============== ======= =======================================================================================
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from gymverse.complexity import check_level

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


@dataclass(frozen=True)
class CurriculumOptions:
    """The curriculum knobs (module docstring); invalid values raise a ValueError naming the knob."""

    evolve: bool = False
    initial_level: int = 1
    promote_at: float = 0.8
    demote_at: float = 0.1
    patience: int = 3
    max_turns: int | None = None
    horizon: str = ""
    horizon_interval: int = 100
    eval_level: int | None = None
    eval_max_turns: int | None = None

    def __post_init__(self) -> None:
        for name in ("initial_level", "eval_level"):
            level = getattr(self, name)
            if level is not None:
                try:
                    check_level(level)
                except (TypeError, ValueError) as err:
                    raise ValueError(f"curriculum option {name}: {err}") from None
        if not 0.0 <= self.demote_at < self.promote_at <= 1.0:
            raise ValueError(f"need 0 <= demote_at < promote_at <= 1, got {self.demote_at}, {self.promote_at}")
        for name in ("patience", "horizon_interval", "max_turns", "eval_max_turns"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"curriculum option {name} must be >= 1, got {value}")
        self.horizon_config()  # a malformed schedule fails here

    @property
    def active(self) -> bool:
        """Whether episodes take their level or turn cap from a curriculum."""
        return self.evolve or bool(self.horizon.strip())

    def horizon_config(self) -> dict[str, Any] | None:
        """``""`` -> None, ``"8"`` -> fixed, ``"10,20,30"`` -> stepwise every `horizon_interval` steps."""
        spec = self.horizon.strip()
        if not spec:
            return None
        try:
            rounds = [int(x) for x in spec.split(",")]
        except ValueError:
            raise ValueError(
                f"curriculum option horizon must be an int or comma-separated ints, got {spec!r}"
            ) from None
        if any(r < 1 for r in rounds):
            raise ValueError(f"curriculum option horizon: turn caps must be >= 1, got {spec!r}")
        if len(rounds) == 1:
            return {"kind": "fixed", "max_turns": rounds[0]}
        return {"kind": "stepwise", "rounds": rounds, "interval": self.horizon_interval}

    def to_config(self, **extra: Any) -> dict[str, Any]:
        """`CurriculumState.from_config` input (`extra`: further sections, e.g. ``mixer``)."""
        return {
            "controller": {
                "initial_level": self.initial_level,
                "promote_at": self.promote_at,
                "demote_at": self.demote_at,
                "promote_patience": self.patience,
                "demote_patience": self.patience,
            },
            "horizon": self.horizon_config(),
            "evolution": self.evolve,
            "max_turns": self.max_turns,
            "eval_level": self.eval_level if self.eval_level is not None else self.initial_level,
            "eval_max_turns": self.eval_max_turns,
            **extra,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (round-trips through `from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, prefix: str = "") -> CurriculumOptions:
        """From typed values; an unknown key raises naming it (with `prefix`, e.g. ``"gymverse."``)."""
        _check_known(data, prefix)
        return cls(**dict(data))

    @classmethod
    def parse(cls, raw: Mapping[str, str], *, prefix: str = "") -> CurriculumOptions:
        """From command-line strings (``"true"``, ``"0.7"``, ``"null"``), converted by each knob's type."""
        _check_known(raw, prefix)  # before converting, so a misspelt knob is named as unknown
        return cls.from_dict({k: parse_value(cls, k, v, prefix=prefix) for k, v in raw.items()}, prefix=prefix)


KNOBS = tuple(f.name for f in fields(CurriculumOptions))


def _check_known(keys: Mapping[str, Any], prefix: str) -> None:
    unknown = sorted(set(keys) - set(KNOBS))
    if unknown:
        raise ValueError(f"unknown curriculum option(s) {[prefix + k for k in unknown]}; known: {list(KNOBS)}")


def parse_value(cls: type, name: str, raw: str, *, prefix: str = "") -> Any:
    """`raw` converted to the type of dataclass field `name` of `cls` (bool, int, float, str, optional of these)."""
    hints = typing.get_type_hints(cls)
    if name not in hints:
        raise ValueError(f"unknown option {prefix}{name}; known: {sorted(hints)}")
    kind = hints[name]
    args = typing.get_args(kind)
    optional = isinstance(kind, types.UnionType) and type(None) in args
    if optional:
        kind = next(a for a in args if a is not type(None))
    text = raw.strip()
    if optional and text.lower() in ("null", "none", ""):
        return None
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"{prefix}{name} takes true or false, got {raw!r}")
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"{prefix}{name}: {raw!r} is not a {kind.__name__}") from None
    return raw
