"""`ChatWrapper`: keep the episode as chat messages and render them as the model's prompt."""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from gymverse.core import StepResult, Wrapper
from gymverse.protocol import EnvLike

Message = dict[str, str]


def render_plain(messages: list[Message]) -> str:
    """The tokenizer-free rendering: ``<|role|>`` + newline + content per message, then ``<|assistant|>``."""
    parts = [f"<|{m['role']}|>\n{m['content']}\n" for m in messages]
    parts.append("<|assistant|>\n")
    return "".join(parts)


class ChatWrapper(Wrapper):
    """Maintain ``system`` / ``user`` (observation) / ``assistant`` (action) messages; the observation becomes the
    rendered conversation, ready to be sent to the model.

    Args:
        env: the env to wrap.
        system_prompt: optional system message placed first.
        tokenizer: a Hugging Face tokenizer with a ``chat_template``; the prompt is then
            ``tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)``. Without one,
            `render_plain` is used (documented above; the string ends with the ``<|assistant|>`` tag).
        window: keep only the last `window` exchanges (assistant action + user observation) after the first
            user message, which always stays because it states the task; None keeps the whole episode.

    The tokenizer is shared, not copied, by `clone` and left out of `get_state`.
    """

    _shared_fields: ClassVar[frozenset[str]] = frozenset({"_tokenizer"})

    def __init__(
        self, env: EnvLike, system_prompt: str | None = None, tokenizer: Any = None, window: int | None = None
    ) -> None:
        super().__init__(env)
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be a positive integer or None, got {window!r}")
        if tokenizer is not None:
            if not callable(getattr(tokenizer, "apply_chat_template", None)):
                raise TypeError(f"tokenizer {type(tokenizer).__name__} has no apply_chat_template()")
            if getattr(tokenizer, "chat_template", None) is None:
                raise ValueError(
                    f"tokenizer {type(tokenizer).__name__} has no chat_template; set tokenizer.chat_template "
                    "or pass tokenizer=None for the plain rendering"
                )
        self._system_prompt = system_prompt
        self._tokenizer = tokenizer
        self._window = window
        self._head: list[Message] = []
        self._exchanges: deque[tuple[Message, Message]] = deque(maxlen=window)

    @property
    def tokenizer(self) -> Any:
        """The tokenizer used for rendering (None: plain rendering)."""
        return self._tokenizer

    @property
    def messages(self) -> list[Message]:
        """The retained conversation: system (if any), the first observation, then the windowed exchanges."""
        out = [dict(m) for m in self._head]
        for assistant, user in self._exchanges:
            out.append(dict(assistant))
            out.append(dict(user))
        return out

    def render(self, messages: list[Message] | None = None) -> str:
        """The prompt for `messages` (default: the current conversation)."""
        msgs = self.messages if messages is None else messages
        if self._tokenizer is None:
            return render_plain(msgs)
        text = self._tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
        return text

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the wrapped env and start a new conversation."""
        obs, info = self.env.reset(seed=seed)
        self._head = []
        if self._system_prompt is not None:
            self._head.append({"role": "system", "content": self._system_prompt})
        self._head.append({"role": "user", "content": obs})
        self._exchanges.clear()
        return self.render(), info

    def step(self, action: str) -> StepResult:
        """Step the wrapped env; record the action and the new observation as messages."""
        res = self.env.step(action)
        self._exchanges.append(({"role": "assistant", "content": action}, {"role": "user", "content": res.observation}))
        return StepResult(self.render(), res.reward, res.terminated, res.truncated, res.info)
