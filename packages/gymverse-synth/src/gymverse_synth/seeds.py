"""Seeds of synthesis: a domain plus an idea (free text, a built-in env to vary, or a CodeIO task+program record)."""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gymverse_synth.model_wheels import REASONING_GYM_WHEEL
from gymverse_synth.spec import Domain

SeedKind = Literal["text", "builtin", "codeio"]
CODEIO_FILE = "codeio.jsonl.gz"


class Seed(BaseModel):
    """What to build: `domain` + `idea`; `payload` carries kind-specific material (env id, CodeIO record)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    domain: Domain
    idea: str = Field(min_length=1)
    kind: SeedKind = "text"
    payload: dict[str, Any] = Field(default_factory=dict)
    id: str = ""

    @model_validator(mode="after")
    def _default_id(self) -> Seed:
        if not self.id:
            # stable across runs, so a resumed pipeline finds the same seed directory
            blob = json.dumps([self.domain, self.idea, self.kind, self.payload], sort_keys=True, default=str)
            self.id = f"{self.kind}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"
        return self


def load_seeds_jsonl(path: str | Path) -> list[Seed]:
    """Seeds from a JSONL file (one `Seed` object per line; blank lines and ``#`` comments skipped)."""
    path = Path(path)
    seeds: list[Seed] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                seeds.append(Seed.model_validate_json(line))
            except ValidationError as err:
                raise ValueError(f"{path}:{lineno}: invalid seed: {err}") from err
    return seeds


def seed_from_builtin(env_id: str, domain: str | None = None) -> Seed:
    """A seed asking for a variation of the registered env `env_id` (its metadata and docstring are the idea)."""
    from gymverse.registry import spec

    factory = spec(env_id).load()
    meta = getattr(factory, "metadata", None)
    doc = inspect.getdoc(factory) or ""
    description = getattr(meta, "description", "") or doc.split("\n", 1)[0]
    declared = dict(getattr(factory, "complexity_params", {}))
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in declared.items()}
    idea = f"A new environment that varies the mechanics of {env_id}: {description}"
    payload = {
        "env_id": env_id,
        "description": description,
        "docstring": doc,
        "action_format": getattr(meta, "action_format", None),
        "complexity_params": params,
    }
    return Seed(domain=domain or getattr(meta, "domain", None) or "Game", idea=idea, kind="builtin", payload=payload)  # type: ignore[arg-type]


def codeio_data_path() -> Path:
    """The CodeIO records shipped by `reasoning-gym` (never imported): from an installed reasoning-gym, else from its
    pinned PyPI wheel fetched once into the GymVerse cache (its declared deps build pycosat from source; see
    `gymverse_synth.model_wheels`)."""
    return REASONING_GYM_WHEEL.file(f"data/{CODEIO_FILE}")


def iter_codeio_records(path: str | Path | None = None) -> Iterator[dict[str, Any]]:
    """Raw CodeIO records (task_description, input_output_spec, code_sample, input_generator, scores)."""
    path = Path(path) if path is not None else codeio_data_path()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{path}:{lineno}: not JSON ({err})") from err
            if not isinstance(record, dict) or "task_description" not in record:
                raise ValueError(f"{path}:{lineno}: not a CodeIO record (no 'task_description')")
            yield record


def _as_int(value: Any) -> int | None:
    # the shipped records store scores as strings ("8")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def load_codeio_seeds(
    n: int | None = None,
    *,
    path: str | Path | None = None,
    domain: str = "Algorithm",
    seed: int = 0,
    max_code_chars: int = 4000,
) -> list[Seed]:
    """`n` CodeIO records turned into seeds (a seeded random sample when `n` is given, else all, file order)."""
    records = list(iter_codeio_records(path))
    if n is not None and n < len(records):
        picks = np.random.default_rng(seed).choice(len(records), size=n, replace=False)
        records = [records[int(i)] for i in sorted(picks)]
    seeds = []
    for r in records:
        payload = {
            "task_description": r["task_description"],
            "input_output_spec": r.get("input_output_spec", ""),
            "code_sample": str(r.get("code_sample", ""))[:max_code_chars],
            "input_generator": str(r.get("input_generator", ""))[:max_code_chars],
            "difficulty": _as_int(r.get("difficulty")),
        }
        idea = "Turn this task into an interactive environment: " + str(r["task_description"])
        seeds.append(Seed(domain=domain, idea=idea, kind="codeio", payload=payload))  # type: ignore[arg-type]
    return seeds
