"""Stage 2 of synthesis: the LLM writes the env program from a design, prompted with the contract and a worked example.

`construct` sends the request and returns a `ConstructionResult` holding everything that was exchanged (messages,
reply, extracted program, tokens, latency), so the pipeline can persist it as one JSON record.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import time
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from gymverse_synth.llm.base import Completion, LLMClient, LLMError
from gymverse_synth.spec import EnvDesign

#: Built-in env shown to the model as the worked example (module path of a file in gymverse.envs).
DEFAULT_EXAMPLE = "gymverse.envs.game.guess_number"
#: Standard-library modules a synthesized program may import (numpy and gymverse.* are allowed too).
ALLOWED_STDLIB: tuple[str, ...] = (
    "__future__",
    "abc",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "re",
    "statistics",
    "string",
    "textwrap",
    "typing",
)

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def load_prompt(name: str) -> str:
    """The text of the prompt template ``prompts/<name>.md``."""
    return resources.files("gymverse_synth").joinpath("prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


def contract_text(class_name: str = "MyEnv") -> str:
    """The GymVerse env contract as the construction and repair prompts state it."""
    return load_prompt("contract").format(class_name=class_name, allowed_stdlib=", ".join(ALLOWED_STDLIB[1:]))


def example_source(module: str = DEFAULT_EXAMPLE) -> str:
    """Source of the worked example: a built-in env module (dotted path) or an env file (``path/to/env.py``)."""
    if module.endswith(".py"):
        return Path(module).read_text(encoding="utf-8")
    return _module_source(module)


@lru_cache(maxsize=8)
def _module_source(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"worked example {module!r} is not an importable module")
    return Path(spec.origin).read_text(encoding="utf-8")


def system_prompt(class_name: str, example: str = DEFAULT_EXAMPLE) -> str:
    """System message of construction and repair: the contract plus the worked example."""
    return load_prompt("construction_system").format(
        contract=contract_text(class_name), example=example_source(example)
    )


def complexity_literal(design: EnvDesign) -> str:
    """The design's complexity table as the Python dict literal the program must declare."""
    items = ", ".join(f"{p.name!r}: ({p.level_1!r}, {p.level_10!r})" for p in design.complexity_params)
    return "{" + items + "}"


def build_construction_messages(design: EnvDesign, example: str = DEFAULT_EXAMPLE) -> list[dict[str, str]]:
    """The construction request: contract + worked example (system), design JSON + complexity knob (user)."""
    user = load_prompt("construction_user").format(
        design=json.dumps(design.model_dump(mode="json"), indent=1),
        complexity_table=complexity_literal(design),
        class_name=design.name,
        domain=design.core_domain,
    )
    return [{"role": "system", "content": system_prompt(design.name, example)}, {"role": "user", "content": user}]


class ProgramExtractionError(ValueError):
    """The reply holds no Python program."""


def extract_program(text: str) -> str:
    """The program in a reply: the ```python block (the longest if several), else the whole reply if it parses.

    An unterminated fence (a reply cut by the token budget) still yields its content, so validation can report
    the real problem (a syntax error at the cut) instead of "no program".
    """
    blocks = [(lang.lower(), body) for lang, body in _FENCE_RE.findall(text)]
    python = [b for lang, b in blocks if lang in ("python", "py", "python3")]
    candidates = python or [b for lang, b in blocks if lang == ""]
    if candidates:
        return max(candidates, key=len).strip() + "\n"
    stripped = text.strip()
    if "class " in stripped:
        try:
            ast.parse(stripped)
        except SyntaxError:
            pass
        else:
            return stripped + "\n"
    raise ProgramExtractionError("the reply contains no ```python fenced block with the program")


class LLMExchange(BaseModel):
    """One request/reply with the model and the program extracted from it (empty when extraction failed)."""

    stage: str
    round: int = 0
    model: str = ""
    messages: list[dict[str, str]] = Field(default_factory=list)
    reply: str = ""
    program: str = ""
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    sampling: dict[str, Any] = Field(default_factory=dict)
    parts: dict[str, Any] = Field(default_factory=dict, description="construction in parts: `PartsState` of the round")

    @property
    def ok(self) -> bool:
        """True when a program was extracted."""
        return self.error is None and bool(self.program)


def exchange_from(
    stage: str, round_: int, messages: list[dict[str, str]], completion: Completion, seconds: float, sampling: Any
) -> LLMExchange:
    """Record a finished request and extract its program."""
    ex = LLMExchange(
        stage=stage,
        round=round_,
        model=completion.model,
        messages=messages,
        reply=completion.text,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        seconds=round(seconds, 3),
        sampling=dict(sampling),
    )
    try:
        ex.program = extract_program(completion.text)
    except ProgramExtractionError as err:
        ex.error = str(err)
    return ex


async def arequest_program(
    client: LLMClient, stage: str, round_: int, messages: list[dict[str, str]], **sampling: Any
) -> LLMExchange:
    """Send `messages`, record the exchange; an unreachable model becomes an exchange with `error` set."""
    started = time.perf_counter()
    try:
        completion = await client.achat(messages, **sampling)
    except LLMError as err:
        return LLMExchange(
            stage=stage, round=round_, model=client.model, messages=messages, error=f"LLM request failed: {err}"
        )
    return exchange_from(stage, round_, messages, completion, time.perf_counter() - started, sampling)


async def aconstruct(
    design: EnvDesign, client: LLMClient, example: str = DEFAULT_EXAMPLE, **sampling: Any
) -> LLMExchange:
    """Ask `client` to write the program for `design` (async)."""
    return await arequest_program(client, "construction", 0, build_construction_messages(design, example), **sampling)


def request_program(
    client: LLMClient, stage: str, round_: int, messages: list[dict[str, str]], **sampling: Any
) -> LLMExchange:
    """Blocking `arequest_program`."""
    started = time.perf_counter()
    try:
        completion = client.chat(messages, **sampling)
    except LLMError as err:
        return LLMExchange(
            stage=stage, round=round_, model=client.model, messages=messages, error=f"LLM request failed: {err}"
        )
    return exchange_from(stage, round_, messages, completion, time.perf_counter() - started, sampling)


def construct(design: EnvDesign, client: LLMClient, example: str = DEFAULT_EXAMPLE, **sampling: Any) -> LLMExchange:
    """Ask `client` to write the program for `design`."""
    return request_program(client, "construction", 0, build_construction_messages(design, example), **sampling)


__all__ = [
    "ALLOWED_STDLIB",
    "DEFAULT_EXAMPLE",
    "LLMExchange",
    "ProgramExtractionError",
    "aconstruct",
    "arequest_program",
    "build_construction_messages",
    "complexity_literal",
    "construct",
    "contract_text",
    "extract_program",
    "load_prompt",
    "request_program",
    "system_prompt",
]
