"""The synthesis pipeline: seed → abstraction → construction → validation → repair rounds → acceptance.

Resumable: every stage of every seed is persisted atomically under ``<out>/<seed_id>/`` (``abstraction.json``,
``construction_r0.json`` + ``env_r0.py``, ``validation_r0.json``, ``repair_r1.json``, ... and ``outcome.json``) and
a rerun skips whatever is already on disk, so an interrupted run loses at most the request in flight. A stage that
failed only because the model was unreachable is redone. Seeds run concurrently (asyncio) under a limit; sandboxed
validation runs in worker threads under its own limit. Accepted envs land in ``<out>/suite/<Name>/`` (see
`gymverse_synth.artifacts`); the run summary is printed and saved as ``<out>/summary.json``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from gymverse_synth import artifacts
from gymverse_synth.abstraction import AbstractionResult, aabstract
from gymverse_synth.construction import DEFAULT_EXAMPLE, LLMExchange, aconstruct
from gymverse_synth.llm.base import LLMClient
from gymverse_synth.parts import aconstruct_parts
from gymverse_synth.repair import arepair
from gymverse_synth.seeds import Seed
from gymverse_synth.sketch_construct import aconstruct_sketch
from gymverse_synth.spec import EnvDesign
from gymverse_synth.validation import ValidationConfig, ValidationFailure, ValidationReport, validate_program

DesignStep = Callable[[Seed, LLMClient], Awaitable[AbstractionResult]]
Status = Literal["accepted", "rejected", "error"]


@dataclass
class SynthConfig:
    """Settings of a synthesis run."""

    out: Path
    max_repairs: int = 2
    abstraction_attempts: int = 3
    concurrency: int = 4
    validation_workers: int = max(1, (os.cpu_count() or 2) - 1)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    #: Sampling arguments of every request (e.g. ``max_tokens``, ``temperature``).
    sampling: dict[str, Any] = field(default_factory=dict)
    example: str = DEFAULT_EXAMPLE
    suite_dir: Path | None = None
    #: ``whole``: the program in one request; ``parts``: method by method, each checked and repaired on its own
    #: (`gymverse_synth.parts`), what a small model can finish within its token budget; ``sketch``: a one-answer task
    #: whose instance generator the model writes as short typed slots (`gymverse_synth.sketch`), what a 135M model can.
    construction: Literal["whole", "parts", "sketch"] = "whole"
    #: Requests per part (or sketch) and round before it counts as failed (``construction="parts"``/``"sketch"``).
    part_attempts: int = 3

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.max_repairs < 0 or self.concurrency < 1 or self.abstraction_attempts < 1 or self.part_attempts < 1:
            raise ValueError("need max_repairs >= 0 and concurrency, abstraction_attempts, part_attempts >= 1")
        if self.construction not in ("whole", "parts", "sketch"):
            raise ValueError(f"construction must be 'whole', 'parts' or 'sketch', got {self.construction!r}")

    @property
    def suite(self) -> Path:
        """Where accepted artifacts and ``index.json`` go (default ``<out>/suite``)."""
        return Path(self.suite_dir) if self.suite_dir is not None else self.out / "suite"


class SeedOutcome(BaseModel):
    """How one seed ended (``outcome.json``): accepted with its artifact, or rejected at a stage for a reason."""

    seed_id: str
    status: Status
    stage: str = Field(description="abstraction, construction, static, load, checker, degeneracy, ... or accepted")
    reason: str = ""
    reasons: list[str] = Field(default_factory=list)
    artifact: str | None = None
    env_name: str | None = None
    repair_rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    checks: list[str] = Field(default_factory=list, description="names of the failed checks of the last round")

    @property
    def reason_key(self) -> str:
        """What the summary groups outcomes by: the stage and the first failed check (``checker/oracle``)."""
        return f"{self.stage}/{self.checks[0]}" if self.checks else self.stage


def _is_transient(exchange: LLMExchange) -> bool:
    return bool(exchange.error and exchange.error.startswith("LLM request failed"))


def _abstraction_transient(result: AbstractionResult) -> bool:
    return result.design is None and bool(result.attempts) and result.attempts[-1].error_kind == "llm"


class _SeedRun:
    """One seed's pass through the stages, reading finished stages from disk and persisting new ones."""

    def __init__(self, seed: Seed, client: LLMClient, config: SynthConfig, validate_sem: asyncio.Semaphore) -> None:
        self.seed, self.client, self.config, self.validate_sem = seed, client, config, validate_sem
        self.dir = config.out / seed.id
        self.timings: dict[str, float] = {}
        self.exchanges: list[LLMExchange] = []
        self.reports: list[ValidationReport] = []

    def _path(self, name: str) -> Path:
        return self.dir / name

    async def design(self, design_step: DesignStep) -> AbstractionResult:
        path = self._path("abstraction.json")
        if path.is_file():
            cached = AbstractionResult.model_validate(artifacts.read_json(path))
            if not _abstraction_transient(cached):
                return cached
        started = time.perf_counter()
        result = await design_step(self.seed, self.client)
        self.timings["abstraction"] = round(time.perf_counter() - started, 3)
        artifacts.atomic_write_json(path, result.model_dump(mode="json"))
        return result

    async def exchange(self, round_: int, design: EnvDesign) -> LLMExchange:
        name = "construction_r0" if round_ == 0 else f"repair_r{round_}"
        path = self._path(f"{name}.json")
        if path.is_file():
            cached = LLMExchange.model_validate(artifacts.read_json(path))
            if not _is_transient(cached):
                return cached
        sampling = self.config.sampling
        if self.config.construction == "parts":
            previous = (self.exchanges[-1], self.reports[-1]) if round_ else (None, None)
            ex = await aconstruct_parts(design, self.client, round_=round_, previous=previous[0], report=previous[1],
                                        attempts=self.config.part_attempts, example=self.config.example,
                                        sampling=sampling)  # fmt: skip
        elif self.config.construction == "sketch":
            report = self.reports[-1] if round_ else None
            ex = await aconstruct_sketch(design, self.client, round_=round_, report=report,
                                         attempts=self.config.part_attempts, sampling=sampling)  # fmt: skip
        elif round_ == 0:
            ex = await aconstruct(design, self.client, self.config.example, **sampling)
        else:
            prev, report = self.exchanges[-1], self.reports[-1]
            ex = await arepair(
                design, prev.program, report, self.client, round_, self.config.max_repairs, self.config.example,
                **sampling,
            )  # fmt: skip
        self.timings[name] = ex.seconds
        if ex.program:
            artifacts.atomic_write_text(self._path(f"env_r{round_}.py"), ex.program)
        artifacts.atomic_write_json(path, ex.model_dump(mode="json"))
        return ex

    async def validate(self, round_: int, exchange: LLMExchange) -> ValidationReport:
        path = self._path(f"validation_r{round_}.json")
        if path.is_file():
            return ValidationReport.model_validate(artifacts.read_json(path))
        if not exchange.program:
            failure = ValidationFailure(stage="static", check="no_program", reason=exchange.error or "empty program")
            report = ValidationReport(passed=False, stage="static", failures=[failure])
        else:
            async with self.validate_sem:
                report = await asyncio.to_thread(validate_program, exchange.program, self.config.validation)
        self.timings[f"validation_r{round_}"] = report.seconds
        artifacts.atomic_write_json(path, report.model_dump(mode="json"))
        return report

    def tokens(self, abstraction: AbstractionResult) -> tuple[int, int]:
        prompt = sum(a.prompt_tokens for a in abstraction.attempts) + sum(e.prompt_tokens for e in self.exchanges)
        completion = sum(a.completion_tokens for a in abstraction.attempts)
        return prompt, completion + sum(e.completion_tokens for e in self.exchanges)

    def provenance(self, abstraction: AbstractionResult, outcome: SeedOutcome) -> dict[str, Any]:
        prompts = [{"stage": "abstraction", "round": 0, "messages": abstraction.messages}]
        prompts += [{"stage": e.stage, "round": e.round, "messages": e.messages} for e in self.exchanges]
        rounds = [
            {"round": e.round, "stage": e.stage, "passed": r.passed, "failures": r.reasons(), "tokens": e.prompt_tokens
             + e.completion_tokens, "llm_seconds": e.seconds, "validation_seconds": r.seconds}
            for e, r in zip(self.exchanges, self.reports)
        ]  # fmt: skip
        return {
            "model": abstraction.model or self.client.model,
            "seed": self.seed.model_dump(mode="json"),
            "seed_idea": self.seed.idea,
            "prompts": prompts,
            "abstraction_attempts": len(abstraction.attempts),
            "repair_rounds": rounds,
            "tokens": {"prompt": outcome.prompt_tokens, "completion": outcome.completion_tokens},
            "timings": self.timings,
            "seconds": outcome.seconds,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }


async def asynthesize_seed(
    seed: Seed,
    client: LLMClient,
    config: SynthConfig,
    *,
    design_step: DesignStep | None = None,
    validate_sem: asyncio.Semaphore | None = None,
) -> SeedOutcome:
    """Run (or resume) one seed through every stage; returns its outcome (also saved as ``outcome.json``)."""
    run = _SeedRun(seed, client, config, validate_sem or asyncio.Semaphore(config.validation_workers))
    outcome_path = run._path("outcome.json")
    if outcome_path.is_file():
        return SeedOutcome.model_validate(artifacts.read_json(outcome_path))
    started = time.perf_counter()
    artifacts.atomic_write_json(run._path("seed.json"), seed.model_dump(mode="json"))
    step = design_step or (lambda s, c: aabstract(s, c, config.abstraction_attempts, **config.sampling))
    abstraction = await run.design(step)

    def finish(status: Status, stage: str, reasons: list[str], **extra: Any) -> SeedOutcome:
        prompt, completion = run.tokens(abstraction)
        return SeedOutcome(
            seed_id=seed.id, status=status, stage=stage, reason=reasons[0] if reasons else "", reasons=reasons,
            repair_rounds=max(0, len(run.exchanges) - 1), prompt_tokens=prompt, completion_tokens=completion,
            seconds=round(time.perf_counter() - started, 3), **extra,
        )  # fmt: skip

    design = abstraction.design
    if design is None:
        kinds = list(dict.fromkeys(a.error_kind or "unknown" for a in abstraction.attempts))
        if _abstraction_transient(abstraction):
            return finish("error", "abstraction", abstraction.failure_reasons[-1:], checks=["llm"])
        outcome = finish("rejected", "abstraction", abstraction.failure_reasons or ["no design"], checks=kinds)
        return _record(run, abstraction, outcome)
    for round_ in range(config.max_repairs + 1):
        ex = await run.exchange(round_, design)
        run.exchanges.append(ex)
        if _is_transient(ex):
            return finish("error", ex.stage, [ex.error or ""], checks=["llm"])
        report = await run.validate(round_, ex)
        run.reports.append(report)
        if report.passed:
            name = artifacts.unique_name(config.suite, design.name, seed.id)
            outcome = finish("accepted", "accepted", [], artifact=name, env_name=design.name)
            artifacts.write_artifact(
                config.suite / name,
                spec=design.model_dump(mode="json"),
                program=ex.program,
                validation=report.model_dump(mode="json"),
                provenance=run.provenance(abstraction, outcome),
            )
            return _record(run, abstraction, outcome)
    last = run.reports[-1]
    outcome = finish("rejected", last.stage, last.reasons(), env_name=design.name, checks=last.failed_checks)
    return _record(run, abstraction, outcome)


def _record(run: _SeedRun, abstraction: AbstractionResult, outcome: SeedOutcome) -> SeedOutcome:
    entry: dict[str, Any] = {
        "status": outcome.status,
        "stage": outcome.stage,
        "seed_id": outcome.seed_id,
        "domain": run.seed.domain,
        "idea": run.seed.idea,
        "repair_rounds": outcome.repair_rounds,
        "stages_dir": os.path.relpath(run.dir, run.config.suite),
    }
    if outcome.status == "accepted":
        entry.update(artifact=outcome.artifact, class_name=outcome.env_name, env_name=outcome.env_name)
    else:
        entry.update(reason=outcome.reason, reasons=outcome.reasons)
        artifacts.atomic_write_json(
            run._path("rejected.json"), {"reason": outcome.reason, "provenance": run.provenance(abstraction, outcome)}
        )
    artifacts.update_index(run.config.suite, outcome.seed_id, entry)
    artifacts.atomic_write_json(run._path("outcome.json"), outcome.model_dump(mode="json"))
    return outcome


class RunSummary(BaseModel):
    """What a run produced (``summary.json``)."""

    seeds: int
    accepted: int
    rejected: int
    errors: int
    rejected_by_reason: dict[str, int]
    repair_rounds: dict[str, int] = Field(description="histogram: repair rounds used -> seeds")
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: str
    outcomes: list[SeedOutcome]
    notes: list[str] = Field(default_factory=list, description="what the run changed on its own, e.g. prompt-only")

    @classmethod
    def build(cls, outcomes: Sequence[SeedOutcome], model: str, seconds: float) -> RunSummary:
        """Aggregate seed outcomes."""
        status = Counter(o.status for o in outcomes)
        return cls(
            seeds=len(outcomes),
            accepted=status["accepted"],
            rejected=status["rejected"],
            errors=status["error"],
            rejected_by_reason=dict(Counter(o.reason_key for o in outcomes if o.status != "accepted").most_common()),
            repair_rounds={str(k): v for k, v in sorted(Counter(o.repair_rounds for o in outcomes).items())},
            prompt_tokens=sum(o.prompt_tokens for o in outcomes),
            completion_tokens=sum(o.completion_tokens for o in outcomes),
            seconds=round(seconds, 3),
            model=model,
            outcomes=list(outcomes),
        )


async def _guarded(seed: Seed, coro: Awaitable[SeedOutcome]) -> SeedOutcome:
    try:
        return await coro
    except Exception as err:  # one seed's bug or dead client must not end the others; nothing marks it done
        reason = f"{type(err).__name__}: {err}"[:500]
        return SeedOutcome(
            seed_id=seed.id,
            status="error",
            stage="pipeline",
            reason=reason,
            reasons=[reason],
            checks=[type(err).__name__],
        )


async def arun_pipeline(
    seeds: Sequence[Seed], client: LLMClient, config: SynthConfig, *, progress: bool = False
) -> RunSummary:
    """Synthesize every seed (at most `config.concurrency` at a time); writes and returns the run summary."""
    from gymverse_synth.synth_progress import ProgressView

    ids = [s.id for s in seeds]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"duplicate seed ids {dupes}: every seed needs its own id (its stage directory)")
    config.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    limit = asyncio.Semaphore(config.concurrency)
    validate_sem = asyncio.Semaphore(config.validation_workers)
    view = ProgressView(len(seeds), enabled=progress)

    async def one(seed: Seed) -> SeedOutcome:
        async with limit:
            view.start(seed.id)
            outcome = await _guarded(seed, asynthesize_seed(seed, client, config, validate_sem=validate_sem))
            view.done(outcome.seed_id, outcome.status, outcome.reason_key)
            return outcome

    with view:
        outcomes = await asyncio.gather(*(one(s) for s in seeds))
    summary = RunSummary.build(outcomes, client.model, time.perf_counter() - started)
    note = getattr(client, "structured_note", None)
    if isinstance(note, str):
        summary.notes.append(note)
    artifacts.atomic_write_json(config.out / "summary.json", summary.model_dump(mode="json"))
    return summary


def run_pipeline(
    seeds: Sequence[Seed], client: LLMClient, config: SynthConfig, *, progress: bool = False
) -> RunSummary:
    """Blocking `arun_pipeline` (do not call from inside a running event loop)."""
    return asyncio.run(arun_pipeline(seeds, client, config, progress=progress))


__all__ = ["RunSummary", "SeedOutcome", "SynthConfig", "arun_pipeline", "asynthesize_seed", "run_pipeline"]
