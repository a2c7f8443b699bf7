"""The requests of construction by sketch (`gymverse_synth.sketch`): the values first, then the answer and question.

Two short requests, each under a JSON schema (forced by the local decoder, sent as ``response_format`` to a server
that honours one) and each checked and repaired on its own: the values must exist before an answer can be computed
from them. The schemas carry patterns built from this design's names, because a small model fills a free string
with prose: an expression starts with a param, ``self.rng``, a bracket, a number or a plain builtin, and the answer
with one of the values just accepted or a builtin, never with a capital letter or a comment.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gymverse_synth.abstraction import DesignParseError, extract_json_object, format_validation_error
from gymverse_synth.construction import LLMExchange
from gymverse_synth.llm.base import LLMClient, LLMError, json_schema_format, with_schema
from gymverse_synth.parts import RETRY_TEMPERATURE
from gymverse_synth.sketch import (
    SAFE_BUILTINS,
    Reveal,
    Sketch,
    SketchError,
    Values,
    check_reveal,
    check_values,
    knobs,
    param_names,
    render,
    tidy_reveal,
    tidy_values,
    worked_examples,
)
from gymverse_synth.spec import EnvDesign
from gymverse_synth.validation import ValidationReport

SKETCH_MAX_TOKENS = 256
#: Characters an expression slot may hold after its start: one line, no comment, no braces (a small model's ramble
#: past the expression begins with ``},`` or ``#``), and at most this many.
_TAIL = r"[^#{}\n]{0,150}"
_CALLS = "|".join(sorted(SAFE_BUILTINS))
VALUES_SYSTEM = (
    "You write the instance generator of a one-answer puzzle as JSON. The complexity params are Python variables of "
    "the same name. `values`: 1 to 4 named values, each ONE Python expression that may use the params, earlier "
    "values, self.rng (a numpy Generator: self.rng.integers(lo, hi), self.rng.choice(list)), math, np and plain "
    "builtins. Reply with the JSON object only."
)
REVEAL_SYSTEM = (
    "You finish a one-answer puzzle whose values are drawn already. `answer`: ONE Python expression computing the "
    "correct answer from the values. `question`: the text the agent sees, with {name} fields where the values go. "
    "Reply with the JSON object only."
)
T = TypeVar("T", bound=BaseModel)


def _pattern(starts: list[str]) -> str:
    return "^(?:" + "|".join(starts) + ")" + _TAIL + "$"


def values_format(design: EnvDesign) -> dict[str, Any]:
    """The first request's ``response_format``: names as identifiers, expressions that start like code."""
    starts = [
        r"self\.rng\.",
        r"np\.",
        r"math\.",
        r"[\[('\"0-9-]",
        f"(?:{_CALLS})\\(",
        *map(re.escape, param_names(design)),
    ]
    schema = Values.model_json_schema()
    expr = schema["$defs"]["Value"]["properties"]["expr"]
    expr.pop("maxLength", None), expr.pop("minLength", None)  # the pattern bounds it: vLLM refuses both together
    expr["pattern"] = _pattern(starts)
    schema["properties"]["values"]["maxItems"] = 4
    return json_schema_format("Values", schema)


def reveal_format(design: EnvDesign, values: Values) -> dict[str, Any]:
    """The second request's ``response_format``: an answer that starts with a value, a param or a builtin call."""
    names = [re.escape(v.name) for v in values.values] + [re.escape(n) for n in param_names(design)]
    schema = Reveal.model_json_schema()
    answer = schema["properties"]["answer"]
    answer.pop("maxLength", None), answer.pop("minLength", None)
    answer["pattern"] = _pattern([f"(?:(?:{_CALLS})\\(|\\()*(?:{'|'.join(names)})\\b"])
    return json_schema_format("Reveal", schema)


def _design_fields(design: EnvDesign) -> dict[str, Any]:
    fields = design.model_dump(mode="json", include={"name", "goal", "state", "observations"})
    fields["complexity_params"] = knobs(design)
    return fields


def values_messages(design: EnvDesign, note: str = "") -> list[dict[str, str]]:
    """The first request: the worked examples' values (system), the design's goal and knobs (user)."""
    shown = "".join(f"\n\nExample: {json.dumps(ex['goal'])}\n{sk.model_dump_json(include={'values'})}"
                    for ex, sk in worked_examples(design))  # fmt: skip
    user = (f"Design: {json.dumps(_design_fields(design))}\nParams you can use: {', '.join(param_names(design))}\n"
            f"{note}Values JSON:")  # fmt: skip
    return [{"role": "system", "content": VALUES_SYSTEM + shown}, {"role": "user", "content": user}]


def renamed(sketch: Sketch, names: list[str]) -> Sketch | None:
    """`sketch` with its values renamed, in order, to `names` (None when it has more values than names): a small model
    copies the example's names into its answer, so they are this design's names."""
    if len(sketch.values) > len(names):
        return None
    mapping = {v.name: names[i] for i, v in enumerate(sketch.values)}

    alt = "|".join(map(re.escape, mapping))

    def in_code(text: str) -> str:
        return re.sub(rf"\b({alt})\b", lambda m: mapping[m.group(1)], text)

    def in_template(text: str) -> str:  # only `{name}` fields: the words around them are prose
        return re.sub(rf"\{{({alt})\}}", lambda m: "{" + mapping[m.group(1)] + "}", text)

    values = [v.model_copy(update={"name": mapping[v.name], "expr": in_code(v.expr)}) for v in sketch.values]
    return Sketch(values=values, answer=in_code(sketch.answer), question=in_template(sketch.question))


def reveal_messages(design: EnvDesign, values: Values, note: str = "") -> list[dict[str, str]]:
    """The second request: the worked examples' answers over their values, renamed to this design's values (system),
    and this design's values (user)."""
    names = [v.name for v in values.values]
    examples = [(ex, renamed(sk, names)) for ex, sk in worked_examples(design)]
    shown = "".join(
        f"\n\nExample: {json.dumps(ex['goal'])}\nValues: {sk.model_dump_json(include={'values'})}\n"
        f"{sk.model_dump_json(include={'answer', 'question'})}"
        for ex, sk in examples
        if sk is not None
    )
    drawn = "\n".join(f"{v.name} = {v.expr}" for v in values.values)
    user = f"Design: {json.dumps(_design_fields(design))}\nValues:\n{drawn}\n{note}Answer and question JSON:"
    return [{"role": "system", "content": REVEAL_SYSTEM + shown}, {"role": "user", "content": user}]


def _parsed(model: type[T], reply: str) -> T:
    try:
        return model.model_validate(extract_json_object(reply))
    except DesignParseError as err:
        raise SketchError([str(err)]) from None
    except ValidationError as err:
        raise SketchError(format_validation_error(err).splitlines()) from None


def parse_values(design: EnvDesign, reply: str) -> tuple[Values, list[str]]:
    """The values in `reply`, tidied and checked slot by slot, with what was mended; raises `SketchError`."""
    values, mended = tidy_values(_parsed(Values, reply))
    failures = check_values(design, values)
    if failures:
        raise SketchError(failures)
    return values, mended


def parse_reveal(design: EnvDesign, values: Values, reply: str) -> tuple[Reveal, list[str]]:
    """The answer and question in `reply`, tidied and checked, with what was mended; raises `SketchError`."""
    reveal, mended = tidy_reveal(values, _parsed(Reveal, reply))
    failures = check_reveal(design, values, reveal)
    if failures:
        raise SketchError(failures)
    return reveal, mended


class _Round:
    """One construction round's requests: sampling, token totals and the record of every attempt."""

    def __init__(self, client: LLMClient, round_: int, attempts: int, sampling: dict[str, Any]) -> None:
        self.client, self.round, self.attempts = client, round_, attempts
        self.sampling = {"max_tokens": SKETCH_MAX_TOKENS, **sampling}
        self.tokens = [0, 0]
        self.records: list[dict[str, Any]] = []
        self.messages: list[dict[str, str]] = []

    async def ask(
        self, part: str, messages: Callable[[str], list[dict[str, str]]], response_format: dict[str, Any],
        parse: Callable[[str], tuple[T, list[str]]],
    ) -> T | None:  # fmt: skip
        """Ask for `part` until its reply parses and passes its check; None after `attempts` rejections."""
        base = with_schema(self.client, self.sampling, response_format)
        note = ""
        for attempt in range(self.attempts):
            greedy = attempt == 0 or base.get("temperature")
            request = base if greedy else {**base, "temperature": RETRY_TEMPERATURE, "seed": attempt}
            self.messages = messages(note)
            completion = await self.client.achat(self.messages, **request)
            self.tokens[0] += completion.prompt_tokens
            self.tokens[1] += completion.completion_tokens
            record: dict[str, Any] = {"part": part, "round": self.round, "reply": completion.text, "failures": []}
            self.records.append(record)
            try:
                out, record["mended"] = parse(completion.text)
            except SketchError as err:
                record["failures"] = err.failures
                note = "The reply was rejected:\n" + "\n".join(f"- {f}" for f in err.failures) + "\nFix these. "
                continue
            return out
        return None


async def aconstruct_sketch(
    design: EnvDesign, client: LLMClient, *, round_: int = 0, report: ValidationReport | None = None,
    attempts: int = 3, sampling: dict[str, Any] | None = None,
) -> LLMExchange:  # fmt: skip
    """Write (round 0) or repair (later rounds, `report`'s failures as the note) the program from a sketch.

    The values are asked for first, then the answer and question over them; each reply is checked slot by slot and
    a rejected one is asked again with its failing slots named (at most `attempts` requests per part). Returns the
    round as one `LLMExchange` (``parts`` holds the sketch and every attempt).
    """
    prior = ""
    if report is not None:
        prior = "The previous program failed validation:\n" + "\n".join(f"- {r}" for r in report.reasons(5)) + "\n"
    run = _Round(client, round_, attempts, dict(sampling or {}))
    started = time.perf_counter()
    sketch: Sketch | None = None
    error: str | None = None
    try:
        values = await run.ask("values", lambda note: values_messages(design, prior + note), values_format(design),
                               lambda text: parse_values(design, text))  # fmt: skip
        if values is not None:
            reveal = await run.ask(
                "answer", lambda note: reveal_messages(design, values, prior + note), reveal_format(design, values),
                lambda text: parse_reveal(design, values, text),
            )  # fmt: skip
            if reveal is not None:
                sketch = Sketch(values=values.values, answer=reveal.answer, question=reveal.question)
        if sketch is None:
            last = run.records[-1]
            error = f"the {last['part']} part was rejected {attempts} times; last: {'; '.join(last['failures'])[:300]}"
    except LLMError as err:
        error = f"LLM request failed: {err}"
    return LLMExchange(
        stage="construction" if round_ == 0 else "repair", round=round_, model=client.model, messages=run.messages,
        reply=run.records[-1]["reply"] if run.records else "", program=render(design, sketch) if sketch else "",
        error=error, prompt_tokens=run.tokens[0], completion_tokens=run.tokens[1],
        seconds=round(time.perf_counter() - started, 3), sampling=dict(sampling or {}),
        parts={"sketch": sketch.model_dump(mode="json") if sketch else None, "attempts": run.records},
    )  # fmt: skip


__all__ = [
    "aconstruct_sketch",
    "parse_reveal",
    "parse_values",
    "reveal_format",
    "reveal_messages",
    "values_format",
    "values_messages",
]
