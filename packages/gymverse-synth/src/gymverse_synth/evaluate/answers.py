r"""Constant answers a model could write, in the env's visible answer format, and when two answers are one.

`candidates` builds them: ``0``, ``1``, ``-1``, empty, ``yes``/``no``, ``A`` and the observation's own example
answers, substituted into the env's action templates (its ``\boxed{...}`` examples). The env's
``sample_random_action`` lends its format only: verbatim its actions may carry the hidden answer. `answer_key` says
what an answer means to a typical parser, so aliases (``\boxed{answer 0}``, ``\boxed{0}``) count once.
"""

from __future__ import annotations

import contextlib
import re

from gymverse.core import Env

CONSTANTS = ("0", "1", "yes", "no", "-1", "", "A")
MAX_CANDIDATES = 16
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _templates(env: Env, obs: str) -> tuple[list[str], list[str]]:
    """Action templates: the env's own sample actions (its answer format, but possibly drawn from hidden state) and
    the observation's (what a model sees)."""
    sampled: list[str] = []
    with contextlib.suppress(Exception):
        for _ in range(3):
            m = _BOXED.search(str(env.sample_random_action()))
            if m:
                sampled.append(m.group(1).strip())
    shown = [m.group(1).strip() for m in _BOXED.finditer(obs)]
    return list(dict.fromkeys(sampled + shown)), list(dict.fromkeys(shown))


def _substitute(template: str, constant: str) -> str | None:
    if re.search(r"<[^<>]*>", template):
        return re.sub(r"<[^<>]*>", constant, template)
    if re.search(r"-?\d+(?!.*\d)", template) and constant.lstrip("-").isdigit():
        return re.sub(r"-?\d+(?!.*\d)", constant, template)
    return None


def candidates(env: Env, obs: str) -> list[str]:
    """Constant answers a model could write, most telling first: each constant substituted into the env's action
    templates and boxed on its own, then the observation's example actions verbatim. The sampler's actions lend
    their format only: verbatim they may carry the hidden answer, which no model sees."""
    templates, shown = _templates(env, obs)
    out: list[str] = []
    for c in CONSTANTS:
        out += [f"\\boxed{{{x}}}" for x in (_substitute(t, c) for t in templates) if x is not None]
        out.append(f"\\boxed{{{c}}}")
    out += [f"\\boxed{{{t}}}" for t in shown]
    return list(dict.fromkeys(out))[:MAX_CANDIDATES]


def answer_key(action: str) -> str:
    """What an answer means to a typical parser: its numbers if it has any, else its words, case and spacing
    folded (``\\boxed{answer 0}`` and ``\\boxed{0}`` are one answer)."""
    m = _BOXED.search(action)
    text = (m.group(1) if m else action).strip().lower()
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    if numbers:
        return "#" + ",".join(str(float(x)) for x in numbers)
    return " ".join(re.findall(r"\w+", text))


__all__ = ["CONSTANTS", "MAX_CANDIDATES", "answer_key", "candidates"]
