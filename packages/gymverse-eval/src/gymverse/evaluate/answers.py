r"""Constant answers a model could write, in the env's visible answer format, and when two answers are one.

`candidates` builds them: ``0``, ``1``, ``-1``, empty, ``yes``/``no``, ``A`` and the observation's own example
answers, substituted into the env's action templates (its ``\boxed{...}`` examples). The env's
``sample_random_action`` lends its format only: verbatim its actions may carry the hidden answer. Which of them
are one answer to the env is judged from its behaviour, not their text (`aliases.Outcomes`).
"""

from __future__ import annotations

import contextlib
import re

from gymverse.protocol import EnvLike

CONSTANTS = ("0", "1", "yes", "no", "-1", "", "A")
MAX_CANDIDATES = 16
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _templates(env: EnvLike, obs: str) -> tuple[list[str], list[str]]:
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


def candidates(env: EnvLike, obs: str) -> list[str]:
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


__all__ = ["CONSTANTS", "MAX_CANDIDATES", "candidates"]
