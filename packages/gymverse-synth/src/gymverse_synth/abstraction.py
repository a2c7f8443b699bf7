"""Stage 1 of synthesis: ask the LLM for a structured environment design and validate it, feeding errors back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from gymverse_synth.llm.base import (
    Completion,
    LLMClient,
    LLMError,
    bounded_schema,
    json_schema_format,
    with_schema,
)
from gymverse_synth.seeds import Seed
from gymverse_synth.spec import EnvDesign, design_field_guide

SYSTEM_PROMPT = """You design text environments for training LLM agents with reinforcement learning.
An environment is a turn-based game or task: reset() shows an observation, the agent answers with an action in
\\boxed{...}, step(action) returns feedback, a reward and whether the episode ended. It must be deterministic given
a seed, have an oracle strategy that always succeeds, and a complexity level 1..10 that makes it harder through
numeric parameters (longer interactions, bigger structures, deeper dependencies).

Reply with ONE JSON object and nothing else. Fields:
{guide}"""

EXAMPLE_DESIGN: dict[str, Any] = {
    "name": "GuessTheNumber",
    "domain": "Game",
    "goal": "Find a hidden integer in [1, upper] within the guess budget.",
    "state": "The hidden target, the current feasible interval [lo, hi], and the number of guesses left.",
    "actions": [{"name": "guess", "syntax": "\\boxed{42}", "description": "Guess an integer in range."}],
    "observations": "At reset: the range and the guess budget. After a guess: 'too low', 'too high' or 'correct'.",
    "feedback": "Out-of-range guesses are reported and cost a turn; a malformed action gets a format error.",
    "rules": ["Each guess uses one turn.", "A guess equal to the target ends the episode with success."],
    "success_conditions": ["The agent guesses the target."],
    "failure_conditions": ["The guess budget runs out."],
    "reward_design": "1.0 on success, 0.0 per other step, -0.1 for a malformed action.",
    "complexity_params": [
        {
            "name": "upper",
            "level_1": 10,
            "level_10": 5000,
            "makes_harder": "structure_size",
            "description": "Upper end of the range.",
        },
        {
            "name": "slack",
            "level_1": 6,
            "level_10": 0,
            "makes_harder": "interaction_length",
            "description": "Spare guesses beyond what binary search needs.",
        },
    ],
    "oracle_strategy": "Binary search: guess the midpoint of [lo, hi] and shrink the interval by the feedback.",
}

_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class DesignParseError(ValueError):
    """The reply held no JSON object (`kind` "json"), or JSON that is not a valid `EnvDesign` ("validation")."""

    def __init__(self, message: str, kind: str = "json") -> None:
        super().__init__(message)
        self.kind = kind


class AbstractionAttempt(BaseModel):
    """One request/reply round: the reply text and, if it was rejected, why."""

    index: int
    reply: str
    error: str | None = None
    error_kind: str | None = None  # "json" | "validation" | "llm"
    prompt_tokens: int = 0
    completion_tokens: int = 0


class AbstractionResult(BaseModel):
    """The outcome of `abstract`: the design (None on failure) plus every attempt, for provenance."""

    seed: Seed
    model: str
    design: EnvDesign | None = None
    attempts: list[AbstractionAttempt] = Field(default_factory=list)
    messages: list[dict[str, str]] = Field(default_factory=list, description="the first request sent")

    @property
    def ok(self) -> bool:
        """True when a design was accepted."""
        return self.design is not None

    @property
    def failure_reasons(self) -> list[str]:
        """The error of every rejected attempt, in order."""
        return [f"attempt {a.index}: {a.error_kind}: {a.error}" for a in self.attempts if a.error]

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over all attempts."""
        return sum(a.prompt_tokens + a.completion_tokens for a in self.attempts)


def _seed_details(seed: Seed) -> str:
    p = seed.payload
    if seed.kind == "builtin":
        params = json.dumps(p.get("complexity_params", {}))
        return (
            f"Existing environment {p.get('env_id')}: {p.get('description', '')}\n"
            f"Its complexity parameters (level 1, level 10): {params}\n"
            "Design a DIFFERENT environment inspired by it: new mechanics or a new twist, not a copy."
        )
    if seed.kind == "codeio":
        return (
            f"Task: {p.get('task_description', '')}\n"
            f"Input/output: {p.get('input_output_spec', '')}\n"
            f"Reference program:\n```python\n{p.get('code_sample', '')}\n```\n"
            "Make it multi-turn: the agent should reach the answer through several actions with feedback."
        )
    return ""


def build_abstraction_messages(seed: Seed, *, with_example: bool = True) -> list[dict[str, str]]:
    """The first request for `seed`: system prompt with the field guide, then the seed (and a worked example)."""
    system = SYSTEM_PROMPT.replace("{guide}", design_field_guide())
    if with_example:
        system += "\n\nExample of a complete reply:\n" + json.dumps(EXAMPLE_DESIGN, indent=1)
    user = f"Domain: {seed.domain}\nIdea: {seed.idea}"
    details = _seed_details(seed)
    if details:
        user += "\n\n" + details
    user += "\n\nReply with the JSON object of the design."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")


def _decode_lenient(chunk: str, start: int) -> Any:
    """Decode the JSON value at `start`, forgiving what small models get wrong but a parser can safely undo.

    Strict first; then raw control characters (newlines, tabs) inside strings, which JSON forbids but which
    only ever mean themselves; then trailing commas before ``}``/``]``. Nothing is evaluated: it stays JSON.
    """
    try:
        return json.JSONDecoder().raw_decode(chunk, start)[0]
    except json.JSONDecodeError as strict_error:
        lenient = json.JSONDecoder(strict=False)
        try:
            return lenient.raw_decode(chunk, start)[0]
        except json.JSONDecodeError:
            pass
        try:
            return lenient.raw_decode(_TRAILING_COMMA_RE.sub(r"\1", chunk[start:]), 0)[0]
        except json.JSONDecodeError:
            raise strict_error from None


def _json_error(err: json.JSONDecodeError) -> str:
    # json's own messages can end in " at" ("Invalid control character at"): don't say "at at"
    msg = err.msg.removesuffix(" at")
    return f"{msg} at line {err.lineno} column {err.colno}"


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`: inside a ```json fence if there is one, else the first bare ``{...}``.

    Prose before or after the object is ignored; see `_decode_lenient` for what else is forgiven.
    """
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    first_error: str | None = None
    for chunk in candidates:
        for start in (i for i, ch in enumerate(chunk) if ch == "{"):
            try:
                obj = _decode_lenient(chunk, start)
            except json.JSONDecodeError as err:
                first_error = first_error or _json_error(err)
                continue
            if isinstance(obj, dict):
                return obj
    if first_error is None:
        raise DesignParseError("the reply contains no JSON object (expected one {...} object)")
    raise DesignParseError(f"the reply is not valid JSON: {first_error}")


def format_validation_error(err: ValidationError, limit: int = 12) -> str:
    """Compact ``field.path: message`` lines, the part of a pydantic error an LLM can act on."""
    lines = []
    for e in err.errors()[:limit]:
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        lines.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - limit
    if more > 0:
        lines.append(f"... and {more} more errors")
    return "\n".join(lines)


def parse_design(text: str) -> EnvDesign:
    """Extract and validate an `EnvDesign` from a reply; raises `DesignParseError` with an actionable message."""
    obj = extract_json_object(text)
    try:
        return EnvDesign.model_validate(obj)
    except ValidationError as err:
        raise DesignParseError(
            "the JSON does not match the design schema:\n" + format_validation_error(err), kind="validation"
        ) from err


def _feedback(error: str) -> str:
    return (
        f"Your reply was rejected:\n{error}\n\n"
        "Reply again with ONE corrected JSON object containing every field, and nothing else."
    )


class DesignRun:
    """The retry loop of a design stage, apart from how the model is called (so sync and async callers share it).

    Each reply is checked with `parse` (which raises `DesignParseError`); a rejected reply goes back to the model
    with `feedback(error)` as the next user turn. Every attempt is kept in `result`.
    """

    def __init__(
        self,
        seed: Seed,
        model: str,
        base: list[dict[str, str]],
        parse: Callable[[str], EnvDesign] = parse_design,
        feedback: Callable[[str], str] = _feedback,
    ) -> None:
        self.base, self.parse, self.feedback = base, parse, feedback
        self.result = AbstractionResult(seed=seed, model=model, messages=base)
        self.messages = base

    def run(self, client: LLMClient, max_attempts: int, sampling: Mapping[str, Any]) -> AbstractionResult:
        """Up to `max_attempts` blocking calls, until a design is accepted or the model cannot be reached."""
        for index in range(max_attempts):
            try:
                completion = client.chat(self.messages, **sampling)
            except LLMError as err:
                return self._failed(index, err)
            if self._judge(index, completion):
                break
        return self.result

    async def arun(self, client: LLMClient, max_attempts: int, sampling: Mapping[str, Any]) -> AbstractionResult:
        """Async `run`."""
        for index in range(max_attempts):
            try:
                completion = await client.achat(self.messages, **sampling)
            except LLMError as err:
                return self._failed(index, err)
            if self._judge(index, completion):
                break
        return self.result

    def _failed(self, index: int, err: LLMError) -> AbstractionResult:
        # the model could not be reached: the stage ends with what it has
        self.result.attempts.append(AbstractionAttempt(index=index, reply="", error=str(err), error_kind="llm"))
        return self.result

    def _judge(self, index: int, completion: Completion) -> bool:
        # True when the reply is an accepted design
        attempt = AbstractionAttempt(
            index=index,
            reply=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        self.result.attempts.append(attempt)
        try:
            design = self.parse(completion.text)
        except DesignParseError as err:
            attempt.error = str(err)
            attempt.error_kind = err.kind
            # only the latest rejected reply goes back: small models lose the thread in long conversations
            feedback = {"role": "user", "content": self.feedback(attempt.error)}
            self.messages = [*self.base, {"role": "assistant", "content": attempt.reply}, feedback]
            return False
        self.result.design = design
        return True


def _check_attempts(max_attempts: int) -> None:
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")


def design_response_format() -> dict[str, Any]:
    """The `EnvDesign` JSON schema as an OpenAI-style ``response_format`` (for clients that decode by schema)."""
    return json_schema_format("EnvDesign", bounded_schema(EnvDesign.model_json_schema()))


def _guided(client: LLMClient, sampling: dict[str, Any]) -> dict[str, Any]:
    return with_schema(client, sampling, design_response_format())


def abstract(seed: Seed, client: LLMClient, max_attempts: int = 3, **sampling: Any) -> AbstractionResult:
    """Ask `client` for a design of `seed`, retrying invalid replies with the error fed back (all attempts kept).

    An `LLMError` (the model could not be reached) ends the stage with a failure result; a `ReplayMiss` propagates.
    """
    _check_attempts(max_attempts)
    return DesignRun(seed, client.model, build_abstraction_messages(seed)).run(
        client, max_attempts, _guided(client, sampling)
    )


async def aabstract(seed: Seed, client: LLMClient, max_attempts: int = 3, **sampling: Any) -> AbstractionResult:
    """Async `abstract`, for running many seeds concurrently."""
    _check_attempts(max_attempts)
    run = DesignRun(seed, client.model, build_abstraction_messages(seed))
    return await run.arun(client, max_attempts, _guided(client, sampling))
