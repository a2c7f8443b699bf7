"""Construction in parts: the program is asked for one method at a time, each part checked as it arrives and repaired
on its own, then assembled into an ordinary env module that goes through the same validation as a whole program.

The module frame (imports, the class, its metadata and complexity table) follows from the design, so it is written
here; the model writes the four methods of the contract (`PARTS`), each in a request short enough for a small model's
token budget, seeing the design, a worked example of that method and the class as written so far. A part is checked
before the next is asked for: it must parse, define the method with the contract's arguments and return, and the
class with it must pass the static checks of `gymverse_synth.validation`. A rejected part goes back with its failures.
When the assembled program fails validation, the repair round asks again only for the part the failure points to.
"""

from __future__ import annotations

import ast
import json
import textwrap
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from gymverse_synth.construction import (
    _FENCE_RE,
    DEFAULT_EXAMPLE,
    LLMExchange,
    complexity_literal,
    example_source,
)
from gymverse_synth.llm.base import LLMClient, LLMError
from gymverse_synth.spec import EnvDesign
from gymverse_synth.validation import ValidationReport, static_check


@dataclass(frozen=True)
class Part:
    """One method the model writes: its contract signature and what it must do."""

    name: str
    method: str
    signature: str
    args: tuple[str, ...]
    task: str
    #: The design fields the request shows: a small model copies long design prose into code, so only what it needs.
    fields: tuple[str, ...] = ("name", "goal", "actions", "complexity_params")


PARTS: tuple[Part, ...] = (
    Part("reset", "_reset", "def _reset(self) -> tuple[str, dict[str, Any]]:", ("self",),
         "the instance generator: read every complexity param from self.params, build a fresh instance with "
         "self.rng only, keep the state on self, set self.params['max_turns'], and return the first observation "
         "(the task and the exact action format) and an info dict."),
    Part("step", "_step", "def _step(self, action: str) -> StepResult:", ("self", "action"),
         "the step logic and checker: text = parse_boxed(action) (raise ActionFormatError for malformed text), "
         "apply the move to the state and return StepResult(observation, reward, terminated, truncated, info); on "
         "success SUCCESS_REWARD, terminated=True, info={'success': True}; a loss ends with info={'success': False}.",
         ("name", "goal", "actions", "rules", "success_conditions", "failure_conditions")),
    Part("solve", "solve", "def solve(self) -> str:", ("self",),
         "the oracle: from the current state, return the next action that leads to success, as text like "
         "\\boxed{...}; following it from reset must always succeed within the turn budget.",
         ("name", "goal", "actions", "oracle_strategy")),
    Part("random_action", "sample_random_action", "def sample_random_action(self) -> str:", ("self",),
         "a random well-formed action drawn from self.rng, as text like \\boxed{...}.", ("name", "actions")),
)  # fmt: skip
PART_BY_NAME = {p.name: p for p in PARTS}
#: Which part a failed check of the final validation points to, when no line number says (default: step).
CHECK_PART = {"oracle": "solve", "reset": "reset", "construct": "reset", "determinism": "reset",
              "complexity_effect": "reset", "complexity_params": "reset",
              "degenerate_crash": "random_action"}  # fmt: skip
MODULE_IMPORTS = (
    "from __future__ import annotations\n\nimport math\nfrom typing import Any\n\nimport numpy as np\n\n"
    "from gymverse.actions import ActionFormatError, CommandGrammar, parse_boxed\n"
    "from gymverse.core import SUCCESS_REWARD, Env, EnvMetadata, StepResult\n"
)


class PartAttempt(BaseModel):
    """One request for one part and how its check ended."""

    part: str
    round: int = 0
    reply: str = ""
    failures: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class PartsState(BaseModel):
    """The accepted code of each part (its method, module-level helpers and imports) and every attempt."""

    methods: dict[str, str] = Field(default_factory=dict)
    helpers: dict[str, str] = Field(default_factory=dict, description="module-level code each part brought")
    attempts: list[PartAttempt] = Field(default_factory=list)
    spans: dict[str, list[int]] = Field(default_factory=dict, description="first and last line of each method")

    @property
    def missing(self) -> list[str]:
        """Parts not accepted yet, in contract order."""
        return [p.name for p in PARTS if p.name not in self.methods]


@dataclass
class PartCode:
    """What a reply holds for a part: the method (indented for the class body) and module-level helpers."""

    method: str
    helpers: str


class PartError(ValueError):
    """A reply whose code is not an acceptable part; `failures` are the reasons, one line each."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.failures = failures


def frame(design: EnvDesign) -> tuple[str, str]:
    """(module head up to the class body, class head) written from the design: imports, metadata, complexity."""
    action = design.actions[0].syntax
    meta = (f"    metadata = EnvMetadata(\n        name={design.name!r},\n        family=\"synth\",\n"
            f"        domain={design.core_domain!r},\n        description={design.goal[:200]!r},\n"
            f"        action_format={action!r},\n    )\n")  # fmt: skip
    head = f"# {design.name}: written in parts from its design by gymverse synth\n{MODULE_IMPORTS}"
    return head, f"class {design.name}(Env):\n{meta}    complexity_params = {complexity_literal(design)}\n"


def assemble(design: EnvDesign, state: PartsState, extra: tuple[str, PartCode] | None = None) -> str:
    """The env module from the accepted parts (plus `extra`, a part under check); missing parts are left out."""
    methods, helpers = dict(state.methods), dict(state.helpers)
    if extra is not None:
        methods[extra[0]], helpers[extra[0]] = extra[1].method, extra[1].helpers
    head, cls = frame(design)
    module_code = "".join(helpers[p.name] + "\n" for p in PARTS if helpers.get(p.name))
    source = head + ("\n" + module_code if module_code else "") + "\n\n" + cls
    state.spans = {}
    for p in PARTS:
        if p.name in methods:
            start = source.count("\n") + 2
            source += "\n" + methods[p.name]
            state.spans[p.name] = [start, source.count("\n")]
    return source


def _code_of(reply: str) -> str:
    blocks = [body for lang, body in _FENCE_RE.findall(reply) if lang.lower() in ("python", "py", "python3", "")]
    return textwrap.dedent(max(blocks, key=len) if blocks else reply).strip() + "\n"


def _segment(lines: list[str], node: ast.stmt) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return textwrap.dedent("\n".join(lines[first - 1 : node.end_lineno]))


def _salvaged(code: str, method: str) -> tuple[ast.Module, str] | None:
    """A reply cut off mid-statement (the token budget, or a model rambling into a broken helper) without its broken
    tail: the longest prefix ending before a ``def``/``class`` that parses and still defines `method`."""
    lines = code.splitlines()
    # cut before a definition first (drops a broken helper whole), then before any line (drops a broken last statement)
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "class ", "@", "async def "))]
    for end in [*reversed(starts[-40:]), *range(len(lines) - 1, max(0, len(lines) - 40), -1)]:
        head = "\n".join(lines[:end]) + "\n"
        try:
            tree = ast.parse(head)
        except SyntaxError:
            continue
        if any(isinstance(n, ast.FunctionDef) and n.name == method for n in ast.walk(tree)):
            return tree, head
    return None


def extract_part(part: Part, reply: str, finish_reason: str | None = None) -> PartCode:
    """The method `part` asks for (from a bare ``def`` or from inside a class) and the module-level code around it."""
    code = _code_of(reply)
    try:
        tree = ast.parse(code)
    except SyntaxError as err:
        if f"def {part.method}" not in code:  # prose, not a broken method: say what is missing
            raise PartError([f"the reply defines no method `{part.method}`: write `{part.signature}`"]) from None
        salvaged = _salvaged(code, part.method)
        if salvaged is None:
            cut = " (cut off by the token budget: write a shorter method)" if finish_reason == "length" else ""
            raise PartError([f"syntax error at line {err.lineno}: {err.msg}{cut}"]) from None
        tree, code = salvaged
    lines = code.splitlines()
    found: list[ast.FunctionDef] = []
    helpers: list[str] = []
    extra_methods: list[str] = []
    others = {p.method for p in PARTS} - {part.method}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name == part.method:
                    found.append(sub)
                elif isinstance(sub, ast.FunctionDef) and sub.name not in others and not sub.name.startswith("__"):
                    extra_methods.append(_segment(lines, sub))  # a helper method the part calls
        elif isinstance(node, ast.FunctionDef) and node.name == part.method:
            found.append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom | ast.Assign | ast.FunctionDef):
            helpers.append(_segment(lines, node))  # checked with the assembled program like everything else
    if not found:
        raise PartError([f"the reply defines no method `{part.method}`: write `{part.signature}`"])
    fn = found[0]
    args = tuple(a.arg for a in fn.args.args)
    failures = []
    if args != part.args:
        failures.append(f"`{part.method}` must take ({', '.join(part.args)}), got ({', '.join(args)})")
    if not any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn)):
        failures.append(f"`{part.method}` never returns a value")
    if failures:
        raise PartError(failures)
    method = "\n\n".join([_segment(lines, fn), *extra_methods])
    return PartCode(method=textwrap.indent(method, "    ") + "\n", helpers="\n\n".join(helpers))


def check_part(design: EnvDesign, state: PartsState, part: Part, reply: str, finish: str | None) -> PartCode:
    """`extract_part`, then the static checks of the class with this part in it; raises `PartError`."""
    code = extract_part(part, reply, finish)
    failures = [f for f in static_check(assemble(design, state, (part.name, code))) if f.check != "env_class"]
    if failures:
        raise PartError([f.describe() for f in failures])
    return code


@lru_cache(maxsize=8)
def example_method(method: str, example: str = DEFAULT_EXAMPLE) -> str:
    """The source of `method` in the worked example env (empty when it has none)."""
    source = example_source(example)
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == method:
            return _segment(lines, node)
    return ""


#: What every part request says about the class (the full contract is for whole programs; a small model needs less).
PART_CONTRACT = (
    "You write one method of a Python text-environment class at a time. The class derives from gymverse.core.Env: "
    "before `_reset` the base class fills self.params with the complexity values of the current level, and self.rng "
    "(a numpy Generator) is the only randomness allowed. Names available: math, np, Any, parse_boxed, "
    "ActionFormatError, CommandGrammar, StepResult, SUCCESS_REWARD; no other imports, never `random` or np.random. "
    "Actions are text like \\boxed{...}."
)


def part_messages(
    design: EnvDesign, state: PartsState, part: Part, example: str, note: str = ""
) -> list[dict[str, str]]:
    """The request for one part: what the class offers and a worked example (system), the design and the class as
    written so far, without the module frame a small model would only copy (user)."""
    shown = example_method(part.method, example)
    system = PART_CONTRACT
    if shown:
        system += f"\n\nThe method `{part.method}` of a correct environment (worked example):\n```python\n{shown}\n```"
    fields = {k: v for k, v in design.model_dump(mode="json").items() if k in part.fields}
    so_far = f"class {design.name}(Env):\n    complexity_params = {complexity_literal(design)}\n"
    so_far += "".join("\n" + state.methods[p.name] for p in PARTS if p.name in state.methods)
    user = (f"Design (JSON): {json.dumps(fields)}\n\nThe class so far:\n```python\n{so_far.rstrip()}\n```\n\n"
            f"Write the method `{part.signature}`: {part.task}\n{note}"
            f"Reply with only this method in ONE ```python block.")  # fmt: skip
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _feedback(part: Part, failures: list[str]) -> str:
    lines = "\n".join(f"- {f}" for f in failures)
    return (
        f"Your method was rejected:\n{lines}\nReply with the corrected `{part.signature}` only, in ONE ```python block."
    )


async def awrite_part(
    client: LLMClient, design: EnvDesign, state: PartsState, part: Part, *, round_: int = 0, attempts: int = 3,
    note: str = "", example: str = DEFAULT_EXAMPLE, sampling: dict[str, Any] | None = None,
) -> bool:  # fmt: skip
    """Ask for `part` until it passes its check (at most `attempts` requests); True when it was accepted.

    Each rejected reply goes back with its failures (only the latest: small models lose long threads). Raises
    `LLMError` when the model cannot be reached.
    """
    base = part_messages(design, state, part, example, note)
    messages = base
    sampling = dict(sampling or {})
    if "max_tokens" not in sampling and "max_tokens" not in getattr(client, "default_sampling", {}):
        sampling["max_tokens"] = PART_MAX_TOKENS  # a server's own default is its whole context
    for attempt in range(attempts):
        started = time.perf_counter()
        completion = await client.achat(messages, **retry_sampling(sampling, attempt))
        record = PartAttempt(part=part.name, round=round_, reply=completion.text,
                             prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                             seconds=round(time.perf_counter() - started, 3))  # fmt: skip
        state.attempts.append(record)
        try:
            code = check_part(design, state, part, completion.text, completion.finish_reason)
        except PartError as err:
            record.failures = err.failures
            feedback = {"role": "user", "content": _feedback(part, err.failures)}
            messages = [*base, {"role": "assistant", "content": completion.text}, feedback]
            continue
        state.methods[part.name], state.helpers[part.name] = code.method, code.helpers
        return True
    return False


#: Temperature of a part's retries when the run samples greedily: a greedy model asked again writes the same reply.
RETRY_TEMPERATURE = 0.7


#: A method needs no more: a model that writes past it is rambling, and a server's default budget is its context.
PART_MAX_TOKENS = 512


def retry_sampling(sampling: dict[str, Any], attempt: int) -> dict[str, Any]:
    """Sampling of a part's `attempt` (0-based): as given, with a token budget of at most `PART_MAX_TOKENS`;
    retries of a greedy run sample, seeded by the attempt."""
    out = dict(sampling)
    if int(out.get("max_tokens") or 0) > PART_MAX_TOKENS:
        out["max_tokens"] = PART_MAX_TOKENS
    if attempt == 0 or out.get("temperature") not in (None, 0, 0.0):
        return out
    return {**out, "temperature": RETRY_TEMPERATURE, "seed": attempt}


def part_to_redo(state: PartsState, report: ValidationReport) -> str:
    """The part the first failure of `report` points to: by its line in the program, else by the check's name."""
    for failure in report.failures:
        if failure.line is not None:
            for name, (first, last) in state.spans.items():
                if first <= failure.line <= last:
                    return name
    first_check = report.failures[0].check if report.failures else ""
    return CHECK_PART.get(first_check, "step")


async def aconstruct_parts(
    design: EnvDesign, client: LLMClient, *, round_: int = 0, previous: LLMExchange | None = None,
    report: ValidationReport | None = None, attempts: int = 3, example: str = DEFAULT_EXAMPLE,
    sampling: dict[str, Any] | None = None,
) -> LLMExchange:  # fmt: skip
    """Write (round 0) or repair (later rounds: the missing parts, else the one `report` points to) the program.

    Returns the round as one `LLMExchange`: the assembled program (empty while a part is missing, with `error`
    naming it), token totals, and the parts' state in `parts` for the next round.
    """
    state = PartsState.model_validate(previous.parts) if previous is not None and previous.parts else PartsState()
    state.attempts = []
    redo: list[tuple[str, str]] = [(name, "") for name in state.missing]
    if not redo and report is not None:
        name = part_to_redo(state, report)
        lines = "\n".join(f"- {line}" for line in report.reasons(5))
        redo = [(name, f"The program with your previous `{PART_BY_NAME[name].method}` failed validation:\n{lines}\n")]
        state.methods.pop(name, None)
    started = time.perf_counter()
    error: str | None = None
    try:
        for name, note in redo:
            ok = await awrite_part(client, design, state, PART_BY_NAME[name], round_=round_, attempts=attempts,
                                   note=note, example=example, sampling=sampling)  # fmt: skip
            if not ok:
                last = state.attempts[-1].failures
                error = f"part {name} was rejected {attempts} times; last: {'; '.join(last)[:300]}"
                break
    except LLMError as err:
        error = f"LLM request failed: {err}"
    program = assemble(design, state) if not state.missing else ""
    return LLMExchange(
        stage="construction" if round_ == 0 else "repair", round=round_, model=client.model, program=program,
        error=error, prompt_tokens=sum(a.prompt_tokens for a in state.attempts),
        completion_tokens=sum(a.completion_tokens for a in state.attempts),
        seconds=round(time.perf_counter() - started, 3), sampling=dict(sampling or {}),
        parts=state.model_dump(mode="json"),
    )  # fmt: skip


__all__ = [
    "PARTS",
    "Part",
    "PartAttempt",
    "PartError",
    "PartsState",
    "aconstruct_parts",
    "assemble",
    "awrite_part",
    "check_part",
    "extract_part",
    "frame",
    "part_messages",
    "part_to_redo",
]
