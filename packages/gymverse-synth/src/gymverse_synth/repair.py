"""Stage 4: repair. A failed validation report goes back to the LLM with the program; the reply is the next try."""

from __future__ import annotations

from typing import Any

from gymverse_synth.construction import DEFAULT_EXAMPLE, LLMExchange, arequest_program, load_prompt, system_prompt
from gymverse_synth.llm.base import LLMClient
from gymverse_synth.spec import EnvDesign
from gymverse_synth.validation import ValidationReport

#: Characters of a crash traceback quoted back to the model (the last frames say where it broke).
TRACEBACK_CHARS = 1200


def failure_text(report: ValidationReport, limit: int = 10) -> str:
    """The failures of `report` as the bullet list the repair prompt shows, with one crash traceback."""
    lines = [f"- {line}" for line in report.reasons(limit)]
    crash = next((f for f in report.failures if f.traceback), None)
    if crash is not None and crash.traceback:
        lines.append(f"Traceback of the first crash ({crash.check}):\n{crash.traceback[-TRACEBACK_CHARS:]}")
    return "\n".join(lines)


def build_repair_messages(
    design: EnvDesign,
    program: str,
    report: ValidationReport | str,
    round_: int,
    max_rounds: int,
    example: str = DEFAULT_EXAMPLE,
) -> list[dict[str, str]]:
    """The repair request: the contract (system), then the failing program and why it failed.

    When the previous reply held no program at all, the request is the construction request again with the failure
    appended, since there is no program to fix and the model needs the design.
    """
    failures = report if isinstance(report, str) else failure_text(report)
    if not program.strip():
        from gymverse_synth.construction import build_construction_messages

        base = build_construction_messages(design, example)
        note = f"Your previous reply was rejected:\n{failures}\nReply with the complete program in ONE ```python block."
        return [*base[:-1], {"role": "user", "content": base[-1]["content"] + "\n\n" + note}]
    user = load_prompt("repair_user").format(
        round=round_, max_rounds=max_rounds, failures=failures, program=program.rstrip(), class_name=design.name
    )
    return [{"role": "system", "content": system_prompt(design.name, example)}, {"role": "user", "content": user}]


async def arepair(
    design: EnvDesign,
    program: str,
    report: ValidationReport | str,
    client: LLMClient,
    round_: int,
    max_rounds: int,
    example: str = DEFAULT_EXAMPLE,
    **sampling: Any,
) -> LLMExchange:
    """Ask `client` for a corrected program (round `round_` of `max_rounds`)."""
    messages = build_repair_messages(design, program, report, round_, max_rounds, example)
    return await arequest_program(client, "repair", round_, messages, **sampling)


__all__ = ["arepair", "build_repair_messages", "failure_text"]
