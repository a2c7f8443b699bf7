"""Construction by sketch: the program's shape is fixed, the model fills short typed slots a small model can finish.

Asked for a whole method, a 135M model repeats one line until its token budget runs out. Asked for JSON whose values
are one-line Python expressions, under a JSON schema the local decoder forces (and a server honours through
``response_format``), it writes something that parses. The sketch is the instance generator of a one-answer task:
named values drawn with ``self.rng`` from the complexity params, the answer computed from them and the question
shown to the agent (a template whose ``{name}`` fields are those values). The step logic and checker (the boxed
answer, compared with case and spacing folded; one turn), the oracle and the random policy follow from the answer, so
`render` writes the module around the model's slots.

This module holds the slots, their checks (`check_values`, `check_reveal`: each parses as one expression and uses
only the params, the earlier values, ``self.rng``, math, numpy and plain builtins, no dunder names; the template
names only known values), the mends that need no second request (`tidy`) and `render`. The requests, values first
and then the answer and question, are in `gymverse_synth.sketch_construct`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import keyword
import string
from typing import Any

from pydantic import BaseModel, Field

from gymverse_synth.parts import frame
from gymverse_synth.spec import ActionSpec, ComplexityParam, EnvDesign

#: Builtins a slot may call: pure functions of their arguments (no I/O, no introspection, no code objects).
SAFE_BUILTINS = frozenset(
    {"abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "int", "len", "list", "max", "min", "pow",
     "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip"}
)  # fmt: skip
#: Modules the rendered program imports; a slot may use their public names.
MODULES = frozenset({"math", "np"})
#: The one-turn answer format every sketched env states in its observation.
ANSWER_FORMAT = r"\boxed{<answer>}"
#: Names the rendered ``_reset`` binds itself.
RESERVED = frozenset({"self", "answer", "question", "QUESTION"})


class Value(BaseModel):
    """One named value of the instance: a Python expression over the params, earlier values and ``self.rng``."""

    name: str = Field(description="snake_case name", json_schema_extra={"pattern": "^[a-z][a-z0-9_]{0,19}$"})
    expr: str = Field(min_length=1, max_length=160, description="one Python expression, e.g. self.rng.integers(1, 9)")


class Values(BaseModel):
    """The first request's slots: the values drawn for one instance."""

    values: list[Value] = Field(min_length=1, max_length=4)


class Reveal(BaseModel):
    """The second request's slots: the answer computed from the values, and the question shown to the agent."""

    answer: str = Field(min_length=1, max_length=160, description="one Python expression over the values")
    question: str = Field(min_length=1, max_length=300, description="text with {name} fields for the values")


class Sketch(Values, Reveal):
    """All slots of a one-answer task: values drawn for the instance, the answer, and the question shown."""


class SketchError(ValueError):
    """A sketch whose slots are not acceptable; `failures` name the slot and the reason, one line each."""

    def __init__(self, failures: list[str]) -> None:
        super().__init__("; ".join(failures))
        self.failures = failures


def _whole(p: ComplexityParam) -> bool:
    """A knob whose values are integers (both ends are), as the core interpolates it."""
    return isinstance(p.level_1, int) and isinstance(p.level_10, int)


def knobs(design: EnvDesign) -> list[dict[str, Any]]:
    """The design's complexity knobs as a request shows them: name and the two ends."""
    return [{"name": p.name, "level_1": p.level_1, "level_10": p.level_10} for p in design.complexity_params]


def param_names(design: EnvDesign) -> list[str]:
    """The complexity params, bound to local names of the same spelling at the top of ``_reset``."""
    return [p.name for p in design.complexity_params]


def _names_in(expr: ast.Expression) -> tuple[set[str], set[str]]:
    """(names read, names bound by comprehensions) in `expr`."""
    read = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return read, bound


def _check_expr(slot: str, text: str, known: set[str]) -> list[str]:
    """Why `text` is not an acceptable slot expression (empty when it is)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        return [f"{slot}: not one Python expression ({err.msg}): {text[:80]!r}"]
    failures: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                failures.append(f"{slot}: private or dunder attribute `.{node.attr}` is not allowed")
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr not in ("rng", "params"):
                failures.append(
                    f"{slot}: `self.{node.attr}` does not exist here; use self.rng or the names {sorted(known)}"
                )
        elif isinstance(node, ast.Lambda | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom):
            failures.append(f"{slot}: {type(node).__name__.lower()} is not allowed in a slot")
        elif isinstance(node, ast.Name) and node.id.startswith("_"):
            failures.append(f"{slot}: the name `{node.id}` is not allowed")
    read, bound = _names_in(tree)
    for name in sorted(read - known - bound - SAFE_BUILTINS - MODULES - {"self"}):
        if hasattr(builtins, name):
            failures.append(f"{slot}: `{name}` may not be used in an env; plain builtins: {sorted(SAFE_BUILTINS)}")
        else:
            failures.append(f"{slot}: unknown name `{name}`; available: {sorted(known)}, self.rng, math, np")
    return failures


def template_fields(question: str) -> list[str]:
    """The field names of a ``str.format`` template, those nested in a format spec too (``{a:{b}}`` formats with
    ``b``: left out, ``{a:{b.__class__}}`` would read an attribute past the check); raises ValueError for a
    malformed one."""
    names: list[str] = []
    for _, name, spec, _ in string.Formatter().parse(question):
        if name is not None:
            names.append(name)
            names += template_fields(spec or "")
    return names


def salvage_expr(text: str) -> str:
    """`text` as one canonical expression: comments dropped and, when a small model ran past the expression's end
    (``...)]},  # ...``), the longest prefix that parses; unchanged when no prefix parses (the check says why)."""
    text = text.strip()
    for end in range(len(text), 0, -1):
        try:
            return ast.unparse(ast.parse(text[:end], mode="eval"))
        except SyntaxError:
            continue
    return text


def tidy_values(values: Values) -> tuple[Values, list[str]]:
    """`values` with each expression salvaged (`salvage_expr`), and what was mended."""
    notes: list[str] = []
    out = []
    for v in values.values:
        expr = salvage_expr(v.expr)
        if expr != v.expr.strip():
            notes.append(f"values.{v.name}: {v.expr.strip()!r} -> {expr!r}")
        out.append(Value(name=v.name, expr=expr))
    return Values(values=out), notes


def tidy_reveal(values: Values, reveal: Reveal) -> tuple[Reveal, list[str]]:
    """`reveal` with the answer salvaged, a comment a model appended to the question dropped, and a question that
    shows no value given the values (the task is unanswerable without them); and what was mended."""
    notes: list[str] = []
    answer = salvage_expr(reveal.answer)
    if answer != reveal.answer.strip():
        notes.append(f"answer: {reveal.answer.strip()!r} -> {answer!r}")
    question = reveal.question.split("  #", 1)[0].split(" # ", 1)[0].strip() or reveal.question
    try:
        shows = bool(template_fields(question))
    except ValueError:
        shows = True  # malformed: the check says so
    if not shows:
        question += "\n" + "\n".join(f"{v.name}: {{{v.name}}}" for v in values.values)
    if question != reveal.question:
        notes.append(f"question: {reveal.question!r} -> {question!r}")
    return Reveal(answer=answer, question=question), notes


def check_values(design: EnvDesign, values: Values) -> list[str]:
    """Why `values` cannot start the instance generator of `design`, slot by slot (empty when they can)."""
    known = set(param_names(design))
    failures: list[str] = []
    for i, value in enumerate(values.values):
        slot = f"values[{i}] ({value.name})"
        if keyword.iskeyword(value.name) or value.name in SAFE_BUILTINS | MODULES | RESERVED:
            failures.append(f"{slot}: `{value.name}` shadows a name the program uses; pick another")
        failures += _check_expr(slot, value.expr, known)
        known.add(value.name)
    return failures


def check_reveal(design: EnvDesign, values: Values, reveal: Reveal) -> list[str]:
    """Why `reveal` cannot finish the task over `values`, slot by slot (empty when it can)."""
    drawn = {v.name for v in values.values}
    known = set(param_names(design)) | drawn
    failures = _check_expr("answer", reveal.answer, known)
    with contextlib.suppress(SyntaxError):  # a constant answer makes a task a constant policy solves
        read = _names_in(ast.parse(reveal.answer.strip(), mode="eval"))[0]
        if not read & drawn and read <= known | SAFE_BUILTINS | MODULES | {"self"}:
            failures.append(f"answer: a constant; compute it from the values {sorted(drawn)}")
    try:
        fields = template_fields(reveal.question)
    except ValueError as err:
        failures.append(f"question: not a valid template ({err}); write literal braces as {{{{ and }}}}")
    else:
        bad = sorted({f for f in fields if f not in known})
        if bad:
            failures.append(f"question: fields {bad} are not values; use {{name}} with one of {sorted(known)}")
        if not fields:
            failures.append("question: shows no value; put the instance in it with {name} fields")
    return failures


def check_sketch(design: EnvDesign, sketch: Sketch) -> list[str]:
    """Why `sketch` cannot be rendered for `design`, slot by slot (empty when it can)."""
    return check_values(design, sketch) + check_reveal(design, sketch, sketch)


def render(design: EnvDesign, sketch: Sketch) -> str:
    """The env module for `sketch`: the design's frame, ``_reset`` from the slots, the fixed one-answer logic."""
    answer = ActionSpec(name="answer", syntax=ANSWER_FORMAT, description="the answer, once")
    head, cls = frame(design.model_copy(update={"actions": [answer]}))
    head = head.replace("written in parts", "written from a sketch", 1)
    kinds = {p.name: "int" if _whole(p) else "float" for p in design.complexity_params}
    lines = [f"        {name} = {kind}(self.params[{name!r}])" for name, kind in kinds.items()]
    lines += [f"        {v.name} = {v.expr.strip()}" for v in sketch.values]
    shown = ", ".join(f"{n}=_plain({n})" for n in dict.fromkeys([*kinds, *(v.name for v in sketch.values)]))
    lines += [
        f"        self.answer = _plain({sketch.answer.strip()})",
        '        self.params["max_turns"] = 1',
        f"        question = QUESTION.format({shown})",
        f"        return question + {' Answer with ' + ANSWER_FORMAT + '.'!r}, {{}}",
    ]
    module = head + f"\nQUESTION = {sketch.question!r}\n" + _HELPERS + "\n\n" + cls
    module += "\n    def _reset(self) -> tuple[str, dict[str, Any]]:\n" + "\n".join(lines) + "\n"
    return module + _FIXED_METHODS


# numpy scalars and arrays shown as plain Python values: numpy 2 prints a list of its ints as `[np.int64(3), ...]`
_HELPERS = """

def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value.tolist() if hasattr(value, "tolist") else value


def _folded(text: object) -> str:
    return "".join(str(text).split()).lower()
"""

_FIXED_METHODS = """
    def _step(self, action: str) -> StepResult:
        text = parse_boxed(action, what="the answer")
        if _folded(text) == _folded(self.answer):
            return StepResult("Correct.", SUCCESS_REWARD, True, False, {"success": True})
        return StepResult("Wrong answer.", 0.0, True, False, {"success": False})

    def solve(self) -> str:
        return "\\\\boxed{" + str(self.answer) + "}"

    def sample_random_action(self) -> str:
        return "\\\\boxed{" + str(int(self.rng.integers(0, 10))) + "}"
"""


#: One-answer tasks shown as worked examples, in the design's own knobs (`worked_examples`): (goal, values, answer,
#: question); ``{n}`` in a value stands for a size the first knob sets.
EXAMPLES: tuple[tuple[str, tuple[tuple[str, str], ...], str, str], ...] = (
    ("Add up a list of numbers.", (("numbers", "[int(x) for x in self.rng.integers(1, 10, size={n})]"),),
     "sum(numbers)", "What is the sum of the numbers {numbers}?"),
    ("Count the ones of a bit string.",
     (("bits", "''.join(str(b) for b in self.rng.integers(0, 2, size={n}))"),),
     "bits.count('1')", "How many ones are in the bit string {bits}?"),
    ("Count how often a value occurs in a list.",
     (("numbers", "[int(x) for x in self.rng.integers(1, 6, size={n})]"), ("target", "int(self.rng.integers(1, 6))")),
     "numbers.count(target)", "How many times does {target} occur in {numbers}?"),
    ("Sort a list of numbers.", (("numbers", "[int(x) for x in self.rng.integers(1, 50, size={n})]"),),
     "sorted(numbers)", "Sort {numbers} in ascending order."),
)  # fmt: skip


def worked_examples(design: EnvDesign) -> list[tuple[dict[str, Any], Sketch]]:
    """The worked examples in the design's own knobs: a small model copies an example's names, so they must exist."""
    first = design.complexity_params[0]
    size = f"2 + {first.name}" if _whole(first) else f"2 + int(10 * {first.name})"
    out = []
    for goal, values, answer, question in EXAMPLES:
        example = {"goal": goal, "complexity_params": knobs(design)}
        sketch = Sketch(values=[Value(name=n, expr=e.replace("{n}", size)) for n, e in values], answer=answer,
                        question=question)  # fmt: skip
        out.append((example, sketch))
    return out


__all__ = [
    "ANSWER_FORMAT",
    "EXAMPLES",
    "Reveal",
    "Sketch",
    "SketchError",
    "Value",
    "Values",
    "check_reveal",
    "check_sketch",
    "check_values",
    "knobs",
    "param_names",
    "render",
    "salvage_expr",
    "tidy_reveal",
    "tidy_values",
    "worked_examples",
]
