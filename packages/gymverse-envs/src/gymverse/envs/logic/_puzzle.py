"""Shared turn logic of the constraint puzzles: edit moves, a paid ``check`` and a final ``submit``."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from gymverse.actions import ActionFormatError, Command, CommandGrammar
from gymverse.core import SUCCESS_REWARD, Env, StepResult


def check_range(what: str, value: int, hi: int) -> int:
    """Return ``value - 1`` (0-based) or raise `ActionFormatError` when `value` is outside 1..hi."""
    if not 1 <= value <= hi:
        raise ActionFormatError(f"{what} {value} is out of range; use 1..{hi}")
    return value - 1


class ConstraintPuzzle(Env):
    """Base of the logic puzzles: subclasses define edit verbs; ``check`` and ``submit`` are handled here.

    ``check`` costs a turn and lists every violated constraint (and how much is still unfilled). ``submit`` ends the
    episode: success when the grid is complete and violates nothing, failure otherwise (the observation says why).
    """

    grammar: ClassVar[CommandGrammar]

    @abstractmethod
    def violations(self) -> list[str]:
        """Human-readable descriptions of every violated constraint of the current grid."""

    @abstractmethod
    def unfilled(self) -> int:
        """How many cells/items still need a value."""

    @abstractmethod
    def render(self) -> str:
        """The current grid as text."""

    @abstractmethod
    def apply(self, cmd: Command) -> tuple[str, dict[str, Any]]:
        """Apply an edit command; raise `ActionFormatError` for out-of-range arguments."""

    @abstractmethod
    def oracle_edit(self) -> str | None:
        """The oracle's next edit command text (without box), or None when the grid is already solved."""

    def _step(self, action: str) -> StepResult:
        cmd = self.grammar.parse(action)
        if cmd.verb == "check":
            problems = self.violations()
            empty = self.unfilled()
            head = f"{len(problems)} violated constraint(s), {empty} unfilled."
            body = "\n".join(f"- {p}" for p in problems[:20])
            more = f"\n- ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            obs = f"Check: {head}\n{body}{more}".rstrip()
            return StepResult(obs, 0.0, False, False, {"violations": len(problems), "unfilled": empty})
        if cmd.verb == "submit":
            problems = self.violations()
            empty = self.unfilled()
            if not problems and empty == 0:
                return StepResult(
                    "Submitted: every constraint holds. Solved!", SUCCESS_REWARD, True, False, {"success": True}
                )
            reason = f"{empty} unfilled" if empty else f"{len(problems)} violated constraint(s)"
            return StepResult(
                f"Submitted an unsolved grid ({reason}). Episode over.",
                0.0,
                True,
                False,
                {"success": False, "violations": len(problems), "unfilled": empty},
            )
        msg, info = self.apply(cmd)
        return StepResult(f"{msg}\n{self.render()}", 0.0, False, False, info)

    def solve(self) -> str:
        edit = self.oracle_edit()
        return r"\boxed{" + (edit if edit is not None else "submit") + "}"
