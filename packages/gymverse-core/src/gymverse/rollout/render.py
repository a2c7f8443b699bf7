"""Renderers: env observations to token ids, around token ids the model generated (which are never re-tokenized).

`run_episode` builds one sequence per episode::

    initial(obs_0) + reply_0 + env_turn(obs_1, reply_0) + reply_1 + env_turn(obs_2, reply_1) + ...

The replies are the generator's ids, verbatim; only env turns are tokenized. That is what makes the sequence
correct for chat templates that are not prefix-stable: Qwen3's hybrid-thinking template drops the ``<think>``
block of earlier assistant turns when it renders a whole conversation, so re-rendering the history would train
the model on text it never produced. Here the model is trained on exactly the tokens it generated.

* `ChatRenderer`: the tokenizer's own chat template (any Hugging Face tokenizer with ``apply_chat_template``).
  ``initial`` renders ``[system?, user(obs_0)]`` with the generation prompt; ``env_turn`` renders a reference
  conversation ``[system?, user, assistant(MARK), <role>(obs)]`` with the generation prompt and keeps what
  follows ``MARK``: the template's end of the assistant turn, the observation in the template's user (or tool)
  turn, and the next generation prompt. If the reply already ends with the template's end-of-turn token, that
  token is not repeated. ``action_text`` is the decoded reply without special tokens and without a leading
  ``<think>...</think>`` block (the env sees the answer, the model is trained on everything it wrote).
* `PlainRenderer`: ``Observation:``/``Action:`` text blocks for base models and text policies, over any
  tokenizer with ``encode``/``decode`` (default `ByteTokenizer`, UTF-8 bytes, needs nothing installed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

_MARK = "GYMVERSEACTIONMARK7F3A"
_FIRST = "GYMVERSEFIRSTOBSERVATION"


@runtime_checkable
class Renderer(Protocol):
    """Turns observations into token ids around the model's replies (see the module docstring)."""

    def initial(self, observation: str) -> list[int]:
        """Prompt ids for the first observation (ending with the generation prompt)."""
        ...

    def env_turn(self, observation: str, reply_ids: Sequence[int]) -> list[int]:
        """Ids that follow a model reply: end of its turn, the observation's turn, the next generation prompt."""
        ...

    def action_text(self, reply_ids: Sequence[int]) -> str:
        """The action the env receives for a reply."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens kept (for logs and text policies)."""
        ...


def strip_thinking(text: str) -> str:
    """`text` after its last ``</think>`` (the whole text when it has none)."""
    return text.rsplit("</think>", 1)[-1] if "</think>" in text else text


class ChatRenderer:
    """Renders env turns through a Hugging Face tokenizer's chat template (see the module docstring)."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        system_prompt: str = "",
        observation_role: str = "user",
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(getattr(tokenizer, "apply_chat_template", None)):
            raise TypeError(f"{type(tokenizer).__name__} has no apply_chat_template(); use PlainRenderer")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no chat_template; set one or use PlainRenderer")
        if observation_role not in ("user", "tool"):
            raise ValueError(f"observation_role must be 'user' or 'tool', got {observation_role!r}")
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.observation_role = observation_role
        self.template_kwargs = dict(template_kwargs or {})
        self._head = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.stop_ids = self._stop_ids()

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **self.template_kwargs
        )
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
        return text

    def _encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def _after_mark(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        text = self._render(messages, generation_prompt)
        if text.count(_MARK) != 1:
            raise ValueError("the chat template does not render assistant messages verbatim; cannot place replies")
        return text.split(_MARK, 1)[1]

    def _stop_ids(self) -> frozenset[int]:
        """The eos token plus the template's end-of-turn token (the first special token closing a reply)."""
        ids = {i for i in (getattr(self.tokenizer, "eos_token_id", None),) if isinstance(i, int)}
        convo = [*self._head, {"role": "user", "content": _FIRST}, {"role": "assistant", "content": _MARK}]
        close = self._encode(self._after_mark(convo, False))
        special = set(getattr(self.tokenizer, "all_special_ids", None) or [])
        added = getattr(self.tokenizer, "added_tokens_decoder", None) or {}
        special |= {int(i) for i, t in added.items() if getattr(t, "special", False)}
        if close and close[0] in special:
            ids.add(close[0])
        return frozenset(ids)

    def initial(self, observation: str) -> list[int]:
        """``[system?, user(observation)]`` with the generation prompt."""
        return self._encode(self._render([*self._head, {"role": "user", "content": observation}], True))

    def env_turn_text(self, observation: str, reply_ids: Sequence[int]) -> str:
        """The text `env_turn` tokenizes."""
        convo = [
            *self._head,
            {"role": "user", "content": _FIRST},
            {"role": "assistant", "content": _MARK},
            {"role": self.observation_role, "content": observation},
        ]
        text = self._after_mark(convo, True)
        if reply_ids and int(reply_ids[-1]) in self.stop_ids:
            emitted = self.tokenizer.decode([int(reply_ids[-1])], skip_special_tokens=False)
            if emitted and text.startswith(emitted):
                text = text[len(emitted) :]
        return text

    def env_turn(self, observation: str, reply_ids: Sequence[int]) -> list[int]:
        """End of the reply's turn (unless the model closed it), the observation's turn, the generation prompt."""
        return self._encode(self.env_turn_text(observation, reply_ids))

    def action_text(self, reply_ids: Sequence[int]) -> str:
        """The reply without special tokens and without its thinking block."""
        return strip_thinking(str(self.tokenizer.decode(list(reply_ids), skip_special_tokens=True))).strip()

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens kept."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))


class ByteTokenizer:
    """UTF-8 bytes as token ids 0..255: a real, dependency-free tokenizer for text policies and tests."""

    eos_token_id: int | None = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """The UTF-8 bytes of `text`."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """`ids` as UTF-8 (invalid sequences replaced)."""
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


class PlainRenderer:
    """``Observation: ...`` / ``Action:`` text blocks (base models, text policies); see the module docstring."""

    def __init__(
        self,
        tokenizer: Any = None,
        *,
        system_prompt: str = "",
        observation_label: str = "Observation:",
        action_label: str = "Action:",
    ) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else ByteTokenizer()
        self.system_prompt = system_prompt
        self.observation_label = observation_label
        self.action_label = action_label

    def _encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def initial(self, observation: str) -> list[int]:
        """System prompt, the first observation, the action cue."""
        head = f"{self.system_prompt}\n\n" if self.system_prompt else ""
        return self._encode(f"{head}{self.observation_label} {observation}\n\n{self.action_label}")

    def env_turn(self, observation: str, reply_ids: Sequence[int]) -> list[int]:
        """The observation block and the next action cue."""
        return self._encode(f"\n\n{self.observation_label} {observation}\n\n{self.action_label}")

    def action_text(self, reply_ids: Sequence[int]) -> str:
        """The decoded reply."""
        return strip_thinking(self.decode(reply_ids)).strip()

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def renderer_for(
    tokenizer: Any, *, system_prompt: str = "", template_kwargs: Mapping[str, Any] | None = None
) -> Renderer:
    """The renderer for a policy's tokenizer: its chat template when it has one, else plain text blocks."""
    if getattr(tokenizer, "chat_template", None) and callable(getattr(tokenizer, "apply_chat_template", None)):
        return ChatRenderer(tokenizer, system_prompt=system_prompt, template_kwargs=template_kwargs)
    return PlainRenderer(tokenizer, system_prompt=system_prompt)
