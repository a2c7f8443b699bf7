r"""Shared plumbing for the command-driven built-in envs of the algorithm and tool-use domains.

Every such env speaks a small command language (``\boxed{verb arg ...}``) declared once as a class-level
`CommandGrammar`; `CommandEnv._step` parses the action and dispatches to ``_do_<verb>`` so malformed text always
becomes an `ActionFormatError` (a -0.1 format-error turn in the base class), never an exception.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any, ClassVar

from gymverse.actions import CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, StepResult


def boxed(verb: str, *args: object) -> str:
    r"""The well-formed action text ``\boxed{verb arg ...}``."""
    return "\\boxed{" + " ".join([verb, *(str(a) for a in args)]) + "}"


class CommandEnv(Env):
    """An env whose actions are grammar commands, with an optional per-episode query budget."""

    grammar: ClassVar[CommandGrammar]
    #: Verbs that spend one unit of ``self.queries_left`` (the rest are free).
    query_verbs: ClassVar[frozenset[str]] = frozenset()
    #: Queries the agent may still ask this episode (set in ``_reset`` by envs that have a budget).
    queries_left: int = 0

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        if cmd.verb in self.query_verbs:
            if self.queries_left <= 0:
                return self.feedback(f"Query budget exhausted; '{cmd.verb}' was not answered. Submit your answer.")
            self.queries_left -= 1
        handler = getattr(self, "_do_" + cmd.verb)  # verbs come from the grammar, so the handler exists
        result: StepResult = handler(*cmd.args)
        return result

    # ------------------------------------------------------------------ helpers for subclasses
    def budget_note(self) -> str:
        """A suffix telling the agent how many queries remain."""
        return f" [{self.queries_left} queries left]" if self.query_verbs else ""

    def feedback(self, text: str, reward: float = 0.0, **info: Any) -> StepResult:
        """A non-terminal step with the given observation."""
        return StepResult(text + self.budget_note(), reward, False, False, dict(info))

    def finish(self, success: bool, text: str, **info: Any) -> StepResult:
        """End the episode: reward 1.0 on success, 0.0 on a wrong final answer."""
        info["success"] = success
        return StepResult(text, SUCCESS_REWARD if success else 0.0, True, False, info)

    def follow_plan(self, plan: Iterable[tuple[Any, ...]], executed: Container[tuple[Any, ...]], answer: object) -> str:
        """The oracle move of a fixed plan: its first command not yet `executed`, or the answer on the last turn."""
        if self.max_turns - self.turn > 1:
            for cmd in plan:
                if cmd not in executed:
                    return boxed(*cmd)
        return boxed("submit", answer)

    def pick(self, options: list[Any]) -> Any:
        """A uniformly chosen element of `options` drawn from this env's RNG."""
        return options[int(self.rng.integers(0, len(options)))]
