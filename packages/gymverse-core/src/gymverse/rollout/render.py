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
  token is not repeated. The text around the observation (in ``initial`` and in ``env_turn``) is rendered once per
  tokenizer and checked against full renders of probe observations; observations a template might treat
  specially are rendered in full each time, and so is the first turn of a template that reads the clock.
  ``action_text`` is the decoded reply without special tokens and without a leading ``<think>...</think>``
  block (the env sees the answer, the model is trained on everything it wrote).
* `PlainRenderer`: ``Observation:``/``Action:`` text blocks for base models and text policies, over any
  tokenizer with ``encode``/``decode`` (default `ByteTokenizer`, UTF-8 bytes, needs nothing installed).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

_MARK = "GYMVERSEACTIONMARK7F3A"
_FIRST = "GYMVERSEFIRSTOBSERVATION"
_SLOT = "GYMVERSEOBSERVATIONSLOT5C1E"
#: Observations rendered in full, not from cached pieces: templates branch on such content (Qwen3 looks for
#: ``<tool_response>`` and ``</think>``), and special-token text is the template's business.
_SPECIAL = ("<tool_", "think>", "<|", "[INST]", "{%", "{{")
#: What the cached pieces are checked against at construction: whitespace, markup, braces, unicode, newlines.
_PROBES = ("plain", "  padded \n", "\nlines\n\nand\ttabs\n", "a < b > c & d", "\\boxed{x} {y}", "Ünïcödé ✓ 数字 — \"'`")


#: Text around an observation: (before, after, whether the template strips the observation).
Pieces = tuple[str, str, bool]


class _Derived(NamedTuple):
    """What `ChatRenderer` derives from a tokenizer and its settings (rendered and checked once per tokenizer)."""

    backend: Any  # the Rust tokenizer when it encodes exactly as the tokenizer does, else None
    decoder: Any  # the Rust tokenizer when it decodes exactly as the tokenizer does, else None
    stop_ids: frozenset[int]
    stop_text: dict[int, str]
    env_pieces: Pieces | None
    initial_pieces: Pieces | None


#: Per tokenizer (weakly held): per (template, system prompt, role, kwargs), what `ChatRenderer` derives from them.
_DERIVED: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], _Derived]] = weakref.WeakKeyDictionary()


def _cacheable(obj: Any) -> bool:
    try:
        hash(obj)
        weakref.ref(obj)
    except TypeError:
        return False
    return True


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
        # What the template gives is the same for every renderer over one tokenizer and settings; adapters build a
        # renderer per episode, so it is derived once per tokenizer (~1 ms of template renders and probe encodes).
        key = (
            str(tokenizer.chat_template),
            system_prompt,
            observation_role,
            repr(sorted(self.template_kwargs.items())),
        )
        per_tokenizer = _DERIVED.setdefault(tokenizer, {}) if _cacheable(tokenizer) else {}
        derived = per_tokenizer.get(key)
        if derived is None:
            self._backend = self._fast_backend()
            self.stop_ids = self._stop_ids()
            stop_text = {i: str(tokenizer.decode([i], skip_special_tokens=False)) for i in self.stop_ids}
            # a template that reads the clock (Llama 3.2's date) would freeze its first turn's date in pieces
            clock = "strftime_now" in key[0]
            initial = None if clock else _pieces(lambda o: self._render([*self._head, _user(o)], True))
            env = _pieces(self._env_turn_rendered)
            derived = _Derived(self._backend, self._fast_decoder(), self.stop_ids, stop_text, env, initial)
            per_tokenizer[key] = derived
        self._backend, self._decoder, self.stop_ids = derived.backend, derived.decoder, derived.stop_ids
        self._stop_text = derived.stop_text
        self._cached_pieces, self._initial_pieces = derived.env_pieces, derived.initial_pieces

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **self.template_kwargs
        )
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
        return text

    def _encode(self, text: str) -> list[int]:
        if self._backend is not None:
            return list(self._backend.encode(text, add_special_tokens=False).ids)
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def _fast_backend(self) -> Any:
        """A Hugging Face fast tokenizer's Rust tokenizer, when it encodes the probes exactly as the tokenizer does
        (it skips ~0.1 ms of Python per call); None otherwise."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None or not callable(getattr(backend, "encode", None)):
            return None
        for probe in (*_PROBES, f"<|im_start|>user\n{_PROBES[3]}<|im_end|>\n"):
            ids = [int(i) for i in self.tokenizer.encode(probe, add_special_tokens=False)]
            if list(backend.encode(probe, add_special_tokens=False).ids) != ids:
                return None
        return backend

    def _fast_decoder(self) -> Any:
        """The Rust tokenizer for `action_text` and `decode` when it decodes probe ids (special tokens among them)
        exactly as the tokenizer does and no Python clean-up runs after it (~0.01 ms per reply); None otherwise."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is None or not callable(getattr(backend, "decode", None)):
            return None
        if getattr(self.tokenizer, "clean_up_tokenization_spaces", False):
            return None  # the tokenizer edits the decoded text in Python, text-dependently
        special = sorted({*self.stop_ids, *(getattr(self.tokenizer, "all_special_ids", None) or [])})[:32]
        for probe in _PROBES:
            ids = [int(i) for i in self.tokenizer.encode(probe, add_special_tokens=False)]
            for seq in (ids, [*special, *ids, *special]):
                for skip in (True, False):
                    if backend.decode(seq, skip_special_tokens=skip) != self.tokenizer.decode(
                        seq, skip_special_tokens=skip
                    ):
                        return None
        return backend

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

    def initial_text(self, observation: str) -> str:
        """The text `initial` tokenizes: ``[system?, user(observation)]`` with the generation prompt, from pieces
        cached per tokenizer unless the observation is one a template may treat specially."""
        pieces = self._initial_pieces
        if pieces is not None and _plain(observation):
            return _fill(pieces, observation)
        return self._render([*self._head, _user(observation)], True)

    def initial(self, observation: str) -> list[int]:
        """``[system?, user(observation)]`` with the generation prompt."""
        return self._encode(self.initial_text(observation))

    def _env_turn_rendered(self, observation: str) -> str:
        """The env turn through the full chat template (the reference the cached pieces must equal)."""
        convo = [
            *self._head,
            {"role": "user", "content": _FIRST},
            {"role": "assistant", "content": _MARK},
            {"role": self.observation_role, "content": observation},
        ]
        return self._after_mark(convo, True)

    def env_turn_text(self, observation: str, reply_ids: Sequence[int]) -> str:
        """The text `env_turn` tokenizes: the template's env turn, from pieces cached per renderer (a Jinja
        render per turn cost ~0.1 ms) unless the observation is one a template may treat specially."""
        pieces = self._cached_pieces
        if pieces is not None and _plain(observation):
            text = _fill(pieces, observation)
        else:
            text = self._env_turn_rendered(observation)
        if reply_ids and int(reply_ids[-1]) in self.stop_ids:
            emitted = self._stop_text[int(reply_ids[-1])]
            if emitted and text.startswith(emitted):
                text = text[len(emitted) :]
        return text

    def env_turn(self, observation: str, reply_ids: Sequence[int]) -> list[int]:
        """End of the reply's turn (unless the model closed it), the observation's turn, the generation prompt."""
        return self._encode(self.env_turn_text(observation, reply_ids))

    def action_text(self, reply_ids: Sequence[int]) -> str:
        """The reply without special tokens and without its thinking block."""
        if self._decoder is not None:
            text = _rust_decode(self._decoder, reply_ids, skip_special_tokens=True)
        else:
            text = self.tokenizer.decode(list(reply_ids), skip_special_tokens=True)
        return strip_thinking(str(text)).strip()

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` with special tokens kept."""
        if self._decoder is not None:
            return _rust_decode(self._decoder, ids, skip_special_tokens=False)
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))


def _rust_decode(decoder: Any, ids: Sequence[int], skip_special_tokens: bool) -> str:
    """`ids` decoded by the Rust tokenizer, the episode's own lists passed as they are (converting a long prompt to
    ints per decode cost more than the decode); ids it refuses (floats) are converted as the tokenizer would."""
    try:
        return str(decoder.decode(ids if isinstance(ids, list | tuple) else list(ids), skip_special_tokens))
    except TypeError:
        return str(decoder.decode([int(i) for i in ids], skip_special_tokens))


def decode_prefixes(renderer: Renderer, ids: Sequence[int], cuts: Sequence[int]) -> tuple[list[str], list[str]]:
    """For the increasing `cuts`: ``renderer.decode(ids[:c])`` for each cut, and the pieces between consecutive cuts
    (from 0), ``renderer.decode(ids[a:b])``. Each piece is decoded once and prefixes are joined pieces, exact when
    the joined pieces equal the whole sequence's decode (checked once; each token is decoded about twice instead of
    once per prefix); where they do not (a character split over a cut, a decoder that drops a piece's leading
    space), every prefix is decoded in full."""
    ids = list(ids)
    pieces, start = [], 0
    for cut in [*cuts, len(ids)]:
        pieces.append(renderer.decode(ids[start:cut]))
        start = cut
    if "".join(pieces) != renderer.decode(ids):
        return [renderer.decode(ids[:cut]) for cut in cuts], pieces[:-1]
    prefixes, text = [], ""
    for piece in pieces[:-1]:
        text += piece
        prefixes.append(text)
    return prefixes, pieces[:-1]


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def _plain(observation: str) -> bool:
    """Whether `observation` may go between cached pieces (no text a template might branch on)."""
    return not any(s in observation for s in _SPECIAL) and not observation.startswith("<")


def _fill(pieces: Pieces, observation: str) -> str:
    before, after, trims = pieces
    return before + (observation.strip() if trims else observation) + after


def _pieces(render: Callable[[str], str]) -> Pieces | None:
    """(text before, text after, trims) around the observation in ``render(observation)``, when the template places
    it verbatim (or stripped, as Llama-3's does) for every probe; None: render every such turn in full."""
    text = render(_SLOT)
    if text.count(_SLOT) != 1:
        return None
    before, after = text.split(_SLOT)
    trims = render(" x\n") == before + "x" + after
    for probe in _PROBES:
        if render(probe) != before + (probe.strip() if trims else probe) + after:
            return None
    return before, after, trims


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
