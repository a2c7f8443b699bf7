"""Wrappers: history and chat rendering, episode stats, time limits, and stack transparency (state, attributes)."""

from __future__ import annotations

from typing import Any

import gymverse.wrappers
import pytest
from gymverse.core import Wrapper
from gymverse.envs.game.guess_number import GuessTheNumber
from gymverse.wrappers import ChatWrapper, EpisodeStatsWrapper, HistoryWrapper, LiveWrapper, render_plain

TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def hf_tokenizer() -> Any:
    """A real `PreTrainedTokenizerFast`: a tiny BPE trained here, with a Jinja chat template (no hub access)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["[UNK]", "<s>", "</s>"], show_progress=False)
    corpus = ["I am thinking of an integer between 1 and 10", "is too low. Higher.", "is too high. Lower.", "boxed"]
    bpe.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
    tok.chat_template = TEMPLATE
    return tok


def guess(n: int) -> str:
    return rf"Let me think... \boxed{{{n}}}"


def test_history_window_separators_and_reset() -> None:
    env = HistoryWrapper(GuessTheNumber(complexity=3, seed=0), window=2)
    obs, _ = env.reset(seed=4)
    task = obs
    assert obs.startswith("[Turn 0] Observation:\nI am thinking of an integer between 1 and ")
    for n in (1, 2, 3):
        obs = env.step(guess(n)).observation
    blocks = obs.split("\n\n")
    assert blocks[0] == task  # the task stays although it left the window
    assert blocks[1] == "[... 1 earlier turn omitted ...]"
    assert blocks[2] == "[Turn 2] Your action:\n" + guess(2)
    assert blocks[3].startswith("[Turn 2] Observation:\n2 is too")
    assert blocks[4] == "[Turn 3] Your action:\n" + guess(3)
    assert len(blocks) == 6
    assert "Turn 1]" not in obs
    assert [h["turn"] for h in env.history] == [0, 2, 3]
    obs, _ = env.reset(seed=4)
    assert obs == task
    assert [h["turn"] for h in env.history] == [0]


def test_history_without_actions_first_or_long_reasoning() -> None:
    env = HistoryWrapper(GuessTheNumber(seed=0), window=1, include_actions=False, keep_first=False)
    env.reset(seed=1)
    obs = env.step(guess(1)).observation
    assert "Your action" not in obs
    assert obs.startswith("[... 1 earlier turn omitted ...]\n\n[Turn 1] Observation:")
    boxed = HistoryWrapper(GuessTheNumber(seed=0), action_view="boxed", window=None)
    boxed.reset(seed=1)
    out = boxed.step("long chain of thought " * 50 + r"\boxed{5}").observation
    assert "[Turn 1] Your action:\n\\boxed{5}\n\n" in out
    assert "chain of thought" not in out
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="window must be a positive integer"):
            HistoryWrapper(GuessTheNumber(), window=bad)  # type: ignore[arg-type]


def test_chat_wrapper_with_real_hf_tokenizer(hf_tokenizer: Any) -> None:
    env = ChatWrapper(GuessTheNumber(seed=0), system_prompt="You are a careful agent.", tokenizer=hf_tokenizer)
    obs, _ = env.reset(seed=2)
    plain = GuessTheNumber(seed=0)
    first = plain.reset(seed=2)[0]
    assert obs == f"<s>system\nYou are a careful agent.</s>\n<s>user\n{first}</s>\n<s>assistant\n"
    res = env.step(guess(5))
    msgs = env.messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == guess(5)
    assert msgs[3]["content"] == plain.step(guess(5)).observation
    assert res.observation == hf_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert res.observation.endswith(f"<s>user\n{msgs[3]['content']}</s>\n<s>assistant\n")
    assert len(hf_tokenizer(res.observation)["input_ids"]) > 10  # the prompt is tokenizable by the same tokenizer
    twin = env.clone()
    assert isinstance(twin, ChatWrapper)
    assert twin.tokenizer is hf_tokenizer
    twin.step(guess(6))
    assert len(twin.messages) == 6
    assert len(env.messages) == 4
    state = env.get_state()
    assert "_tokenizer" not in state["wrapper"]
    env.step(guess(7))
    env.set_state(state)
    assert len(env.messages) == 4
    assert env.tokenizer is hf_tokenizer


def test_chat_wrapper_plain_rendering_and_window() -> None:
    env = ChatWrapper(GuessTheNumber(seed=0), window=1)
    obs, _ = env.reset(seed=3)
    assert obs.startswith("<|user|>\nI am thinking")
    assert obs.endswith("\n<|assistant|>\n")
    env.step(guess(1))
    env.step(guess(2))
    msgs = env.messages
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == guess(2)
    assert env.step(guess(3)).observation == render_plain(env.messages)
    assert render_plain([{"role": "system", "content": "S"}]) == "<|system|>\nS\n<|assistant|>\n"


def test_chat_wrapper_rejects_tokenizer_without_template(hf_tokenizer: Any) -> None:
    import copy

    bare = copy.deepcopy(hf_tokenizer)
    bare.chat_template = None
    with pytest.raises(ValueError, match="no chat_template"):
        ChatWrapper(GuessTheNumber(), tokenizer=bare)
    with pytest.raises(TypeError, match="apply_chat_template"):
        ChatWrapper(GuessTheNumber(), tokenizer=object())


def test_episode_stats_records_and_aggregates() -> None:
    env = EpisodeStatsWrapper(GuessTheNumber(seed=0), recent=2)
    env.reset(seed=5)
    first = env.step("no box")  # format error
    assert first.info["format_error"]
    assert "episode" not in first.info
    while True:
        res = env.step(env.solve())
        if res.done:
            break
    ep = res.info["episode"]
    assert set(ep) == {"return", "length", "success", "format_errors", "time"}
    assert ep["success"] is True
    assert ep["format_errors"] == 1
    assert ep["length"] == env.unwrapped.turn
    assert ep["return"] == pytest.approx(1.0 - 0.1)
    assert ep["time"] >= 0.0
    env.reset(seed=6)
    env.step(guess(1))  # abandoned by the next reset: not counted
    env.reset(seed=7)
    for _ in range(env.max_turns):
        res = env.step(guess(10_000))  # out of range: never succeeds
    assert res.truncated
    assert res.info["episode"]["success"] is False
    stats = env.stats
    assert stats["episodes"] == 2
    assert stats["success_rate"] == 0.5
    assert env.episode_count == 2
    assert stats["mean_length"] == (ep["length"] + env.max_turns) / 2
    assert stats["format_error_rate"] == pytest.approx(1 / (ep["length"] + env.max_turns))
    assert stats["recent_success_rate"] == 0.5
    assert len(env.recent_episodes) == 2
    env.reset_stats()
    assert env.stats["episodes"] == 0
    assert env.stats["success_rate"] == 0.0


def test_the_turn_cap_is_the_env_s_own_through_any_stack() -> None:
    """No time-limit wrapper: `max_turns=` caps the env itself, and every layer reports that one cap."""
    stack = HistoryWrapper(EpisodeStatsWrapper(GuessTheNumber(seed=0, max_turns=2)))
    assert stack.max_turns == 2
    stack.reset(seed=1)
    a = stack.step(guess(1000))
    assert not a.truncated and not stack.done
    b = stack.step(guess(1000))
    assert b.truncated and not b.terminated and b.info["success"] is False
    assert b.observation.endswith("Turn limit of 2 reached.")
    assert stack.done and stack.unwrapped.done  # one episode end, the env's own, seen by every layer
    with pytest.raises(RuntimeError, match="after the episode ended; call reset"):
        stack.step(guess(1))
    assert not hasattr(gymverse.wrappers, "TimeLimit")


def make_stack(seed: int = 0) -> EpisodeStatsWrapper:
    return EpisodeStatsWrapper(Wrapper(HistoryWrapper(GuessTheNumber(seed=seed, max_turns=6), window=3)))


def test_three_deep_stack_is_transparent() -> None:
    stack = make_stack()
    base = stack.unwrapped
    assert isinstance(base, GuessTheNumber)
    assert [type(w).__name__ for w in stack.wrappers()] == [
        "EpisodeStatsWrapper",
        "Wrapper",
        "HistoryWrapper",
    ]
    stack.set_complexity(5)
    assert base.complexity == 5
    assert stack.complexity == 5
    _obs, info = stack.reset(seed=3)
    assert info["complexity"] == 5
    assert stack.params["upper"] == base.params["upper"] == 2228
    # reads are live and explicit: a change made on the base env is visible through every layer
    base.target = 1234
    assert stack.get_wrapper_attr("target") == 1234
    # the one explicit write path reaches the base env; the wrapper's own fields stay its own
    stack.set_wrapper_attr("target", 77)
    assert base.target == 77
    assert "target" not in stack.__dict__
    assert stack.get_wrapper_attr("window") == 3
    assert stack.turn == 0
    res = stack.step(guess(77))
    assert res.terminated
    assert res.info["success"]
    assert res.info["episode"]["length"] == 1
    assert stack.turn == 1
    assert stack.done
    with pytest.raises(AttributeError):
        _ = stack.no_such_attribute  # type: ignore[attr-defined]  # deliberately absent


def test_stack_state_snapshot_and_clone_include_wrapper_fields() -> None:
    stack = make_stack(seed=1)
    stack.reset(seed=9)
    for n in (100, 200):
        stack.step(guess(n))
    snap = stack.get_state()
    twin = stack.clone()
    actions = [guess(n) for n in (300, 400, 500, 600)]
    first = [stack.step(a) for a in actions]
    assert first[-1].truncated and "Turn limit of 6 reached." in first[-1].observation
    assert stack.episode_count == 1
    stack.set_state(snap)
    assert stack.episode_count == 0
    assert stack.turn == 2
    assert [h["turn"] for h in stack.get_wrapper_attr("history")] == [0, 1, 2]
    again = [stack.step(a) for a in actions]
    strip = [(r.observation, r.reward, r.truncated) for r in first]
    assert [(r.observation, r.reward, r.truncated) for r in again] == strip
    assert [(r.observation, r.reward, r.truncated) for r in (twin.step(a) for a in actions)] == strip
    assert twin.unwrapped is not stack.unwrapped


def test_same_seed_same_transcript_through_wrappers() -> None:
    def run(seed: int) -> list[str]:
        env = make_stack(seed=seed)
        out = [env.reset(seed=seed)[0]]
        while not env.done:
            out.append(env.step(env.sample_random_action()).observation)
        return out

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_live_wrapper_subclass_fields_and_plain_wrapper_interop() -> None:
    class Counting(LiveWrapper):
        def __init__(self, env: Any) -> None:
            super().__init__(env)
            self.calls = 0  # set during __init__: stays on the wrapper

        def step(self, action: str) -> Any:
            self.calls += 1
            return self.env.step(action)

    env = Counting(Wrapper(GuessTheNumber(seed=0)))
    env.reset(seed=0)
    env.step(guess(1))
    assert env.calls == 1
    assert not hasattr(env.unwrapped, "calls")
    del env.calls
    assert not hasattr(env, "calls")


def test_class_level_defaults_do_not_shadow_the_base_env() -> None:
    class Strict(GuessTheNumber):
        format_penalty = -0.5

    env = make_stack()
    assert env.format_penalty == -0.1
    strict = HistoryWrapper(Wrapper(Strict(seed=0, max_turns=5)))
    assert strict.format_penalty == -0.5
    strict.reset(seed=0)
    assert strict.step("no box").reward == -0.5
