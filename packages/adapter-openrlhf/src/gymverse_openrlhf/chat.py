"""Env observations as chat turns in the policy's own template.

OpenRLHF appends ``environment_feedback`` right after the model's action tokens, so the feedback must close the
assistant turn (unless the model already emitted the closing token), open a user turn with the observation and
end with the generation prompt. All three pieces are read off the tokenizer's chat template by rendering a
two-turn conversation with placeholders, so any template that renders turns by concatenation works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_ACT = "\x00GYMVERSE_ACTION\x00"
_OBS = "\x00GYMVERSE_OBSERVATION\x00"


@dataclass(frozen=True)
class ChatTurns:
    """Template pieces: text closing an assistant turn, and the user turn (+ generation prompt) around `_OBS`."""

    close: str
    user_turn: str
    eos_ids: frozenset[int]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatTurns | None:
        """Pieces of `tokenizer`'s chat template; None when it has none or renders turns non-additively."""
        if not getattr(tokenizer, "chat_template", None):
            return None
        base = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _ACT}]
        try:
            first = tokenizer.apply_chat_template(base, tokenize=False)
            both = tokenizer.apply_chat_template(
                [*base, {"role": "user", "content": _OBS}], tokenize=False, add_generation_prompt=True
            )
        except Exception:  # templates that reject this shape (e.g. strict alternation rules) fall back
            return None
        if not isinstance(first, str) or not both.startswith(first) or first.count(_ACT) != 1:
            return None
        close = first.split(_ACT, 1)[1]
        user_turn = both[len(first) :]
        if user_turn.count(_OBS) != 1:
            return None
        eos = {i for i in (getattr(tokenizer, "eos_token_id", None),) if isinstance(i, int)}
        if close.strip():
            # the first special token of the closing text (e.g. <|im_end|>) also ends the model's turn
            ids = tokenizer(close, add_special_tokens=False)["input_ids"]
            special = set(getattr(tokenizer, "all_special_ids", []) or [])
            if ids and ids[0] in special:
                eos.add(int(ids[0]))
        return cls(close, user_turn, frozenset(eos))

    def feedback(self, observation: str, action_ids: list[int] | None, tokenizer: Any) -> str:
        """Text to append after the action: the rest of the assistant turn, then the observation's user turn."""
        close = self.close
        if action_ids and action_ids[-1] in self.eos_ids:
            emitted = tokenizer.decode([action_ids[-1]], skip_special_tokens=False)
            if close.startswith(emitted):
                close = close[len(emitted) :]
            elif close.lstrip().startswith(emitted):
                close = close.lstrip()[len(emitted) :]
        return close + self.user_turn.replace(_OBS, observation)


def plain_feedback(observation: str) -> str:
    """Fallback without a chat template: the observation as its own paragraph."""
    return f"\n\n{observation}\n\n"


def render_prompt(tokenizer: Any, observation: str) -> str | None:
    """The first observation as a one-message chat prompt, or None without a chat template."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": observation}], tokenize=False, add_generation_prompt=True
    )
    return text if isinstance(text, str) else None
