"""Stage 7: evolution. Given an accepted env and the success agents reach at its top level, synthesize a harder
variant (a wider complexity range or new mechanics) and put it through the same construction, validation and repair.

The evolved design must be measurably harder than its parent on paper (a new complexity param, or a level-10 value
moved further from level 1) before any code is written; a design that is not is fed back to the model like a schema
error. The parent's own program is the worked example of the construction prompt.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from gymverse_synth import artifacts
from gymverse_synth.abstraction import (
    AbstractionResult,
    DesignParseError,
    DesignRun,
    build_abstraction_messages,
    design_response_format,
    parse_design,
)
from gymverse_synth.construction import load_prompt
from gymverse_synth.llm.base import LLMClient, with_schema
from gymverse_synth.pipeline import SeedOutcome, SynthConfig, asynthesize_seed
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign


def harder_check(old: EnvDesign, new: EnvDesign) -> str | None:
    """None when `new` is harder than `old` (a new param, or a level-10 value further from level 1), else why not."""
    before = {p.name: p for p in old.complexity_params}
    for p in new.complexity_params:
        prev = before.get(p.name)
        if prev is None:
            return None
        # "harder" follows the parent's direction: growing params must grow further, shrinking ones shrink further
        direction = 1 if prev.level_10 > prev.level_1 else -1
        if direction * (p.level_10 - prev.level_10) > 0:
            return None
    table = {p.name: [p.level_1, p.level_10] for p in new.complexity_params}
    return (
        f"the new design is not harder than the current one: complexity_params {json.dumps(table)} add no param and "
        "move no level_10 value further from level_1 than before; widen a range or add a new complexity param"
    )


def evolve_seed(env_dir: Path, design: EnvDesign, measured_success: float) -> Seed:
    """The seed of an evolution run (its id depends on the parent and the measured success, so reruns resume)."""
    idea = f"A harder variant of {design.name} (agents succeed {measured_success:.0%} at level 10)"
    payload = {"parent": str(env_dir), "parent_name": design.name, "measured_success": measured_success}
    return Seed(domain=design.domain, idea=idea, kind="text", payload=payload)


def build_evolve_messages(
    design: EnvDesign, seed: Seed, measured_success: float, new_name: str
) -> list[dict[str, str]]:
    """The design request of an evolution: the abstraction system prompt, then the parent design and the ask."""
    system = build_abstraction_messages(seed)[0]
    user = load_prompt("evolve_user").format(
        success_pct=round(100 * measured_success),
        new_name=new_name,
        design=json.dumps(design.model_dump(mode="json"), indent=1),
    )
    return [system, {"role": "user", "content": user}]


async def _evolved_design(
    seed: Seed,
    client: LLMClient,
    parent: EnvDesign,
    measured_success: float,
    new_name: str,
    max_attempts: int,
    sampling: dict[str, Any],
) -> AbstractionResult:
    def parse(text: str) -> EnvDesign:
        design = parse_design(text).model_copy(update={"name": new_name})
        why = harder_check(parent, design)
        if why is not None:
            raise DesignParseError(why, kind="not_harder")
        return design

    def feedback(error: str) -> str:
        return f"Your reply was rejected:\n{error}\n\nReply again with ONE corrected JSON object, nothing else."

    base = build_evolve_messages(parent, seed, measured_success, new_name)
    run = DesignRun(seed, client.model, base, parse=parse, feedback=feedback)
    # the evolved design has the design's schema: structured output where the client honours it, like abstraction
    return await run.arun(client, max_attempts, with_schema(client, sampling, design_response_format()))


async def aevolve(
    env_dir: str | Path,
    client: LLMClient,
    measured_success: float,
    *,
    config: SynthConfig | None = None,
    new_name: str | None = None,
) -> SeedOutcome:
    """Synthesize and validate a harder variant of the accepted env in `env_dir` (an artifact directory).

    The variant joins the same suite (``env_dir``'s parent) unless `config` says otherwise; its stage records go to
    ``<suite>/.evolve/<seed_id>/``. Returns the variant's outcome (accepted with its artifact name, or rejected).
    """
    env_dir = Path(env_dir).resolve()
    if not 0.0 <= measured_success <= 1.0:
        raise ValueError(f"measured_success must be a success rate in [0, 1], got {measured_success!r}")
    for needed in ("spec.json", "env.py"):
        if not (env_dir / needed).is_file():
            raise FileNotFoundError(f"{env_dir} is not an artifact directory: {needed} is missing")
    parent = EnvDesign.model_validate(artifacts.read_json(env_dir / "spec.json"))
    config = config or SynthConfig(out=env_dir.parent / ".evolve", suite_dir=env_dir.parent)
    config = dataclasses.replace(config, example=str(env_dir / "env.py"))
    name = new_name or _next_name(parent.name)
    seed = evolve_seed(env_dir, parent, measured_success)

    async def step(s: Seed, c: LLMClient) -> AbstractionResult:
        return await _evolved_design(
            s, c, parent, measured_success, name, config.abstraction_attempts, dict(config.sampling)
        )

    return await asynthesize_seed(seed, client, config, design_step=step)


def _next_name(name: str) -> str:
    stem, digits = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")) :]
    if digits and stem.endswith("V"):
        return f"{stem}{int(digits) + 1}"
    return f"{name}V2"


def evolve(
    env_dir: str | Path,
    client: LLMClient,
    measured_success: float,
    *,
    config: SynthConfig | None = None,
    new_name: str | None = None,
) -> SeedOutcome:
    """Blocking `aevolve`."""
    return asyncio.run(aevolve(env_dir, client, measured_success, config=config, new_name=new_name))


__all__ = ["aevolve", "build_evolve_messages", "evolve", "evolve_seed", "harder_check"]
