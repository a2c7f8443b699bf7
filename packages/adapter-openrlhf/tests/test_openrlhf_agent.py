"""Our agent instance inside OpenRLHF's own `MultiTurnAgentExecutor`, with a real tokenizer and a scripted engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import gymverse
import pytest
from gymverse.envs.game.guess_number import GuessTheNumber
from gymverse.registry import deregister, register
from gymverse.testing import tiny_tokenizer
from gymverse.vector import shared_pool
from gymverse_openrlhf.agent_func import AgentExecutor
from gymverse_openrlhf.labels import EnvLabel, dataset_rows
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

ENV = "game:GuessTheNumber"


def oracle(env_id: str, seed: int, complexity: int | None = None) -> list[tuple[str, str, float, dict[str, Any]]]:
    """(action, next observation, reward, info) per turn of the env's own oracle."""
    env = gymverse.make(env_id) if complexity is None else gymverse.make(env_id, complexity=complexity)
    env.reset(seed=seed)
    turns = []
    while True:
        action = env.solve()
        obs, reward, terminated, truncated, info = env.step(action)
        turns.append((action, obs, reward, info))
        if terminated or truncated:
            return turns


def chat_prompt(tokenizer: Any, text: str) -> str:
    """The prompt as OpenRLHF builds it with --data.apply_chat_template."""
    messages = [{"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def run(
    executor: Any, prompt: str, label: str, engine: Any, sampling_params: Any, tok: Any, max_length: int = 4096
) -> Any:
    return asyncio.run(
        executor.execute(
            prompt=prompt,
            label=label,
            sampling_params=sampling_params,
            max_length=max_length,
            hf_tokenizer=tok,
            llm_engine=engine,
        )
    )


@pytest.mark.parametrize("complexity", [None, 4])
def test_episode_end_to_end_tokens_rewards_labels(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, complexity: Any
) -> None:
    row = next(dataset_rows([ENV], 1, seed=11, complexity=complexity))
    label = row["label"]
    turns = oracle(ENV, 11, complexity)
    assert len(turns) >= 2, "the oracle should need several guesses for a multi-turn check"
    engine = engine_cls(tokenizer, [a for a, *_ in turns])
    prompt = chat_prompt(tokenizer, row["prompt"])

    out = run(AgentExecutor(), prompt, label, engine, sampling_params, tokenizer)

    tokens = out["observation_tokens"]
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert tokens[: len(prompt_ids)] == prompt_ids
    assert len(out["action_ranges"]) == len(turns)
    for i, (start, end) in enumerate(out["action_ranges"]):
        assert tokens[start:end] == engine.returned[i]
        assert engine.prompts[i] == tokens[:start]  # the model saw exactly the sequence so far
    # between actions: the next observation as a user turn; the model's own <|im_end|> is not repeated
    for (_, obs, _, _), (_, end), (nxt, _) in zip(turns, out["action_ranges"], out["action_ranges"][1:]):
        assert tokenizer.decode(tokens[end:nxt]) == f"\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n"
    assert len(tokens) == out["action_ranges"][-1][1]  # nothing is appended after the final action
    assert out["reward"] == pytest.approx(sum(r for _, _, r, _ in turns))
    assert out["scores"] == 1.0
    # the label comes back as it was, plus the episode's per-turn rewards for the trainer's per-turn PERPO
    returned = EnvLabel.parse(out["label"])
    assert returned.turn_rewards == tuple(r for _, _, r, _ in turns)
    assert replace(returned, turn_rewards=None) == EnvLabel.parse(label)
    level = complexity or gymverse.make(ENV).complexity
    assert out["extra_logs"] == {
        "gymverse_env_index": 0,
        "gymverse_complexity": level,
        "gymverse_success": 1.0,
        "gymverse_turns": len(turns),
        "gymverse_error": 0.0,
    }
    # OpenRLHF's own conversion into a training sample keeps exactly the action tokens trainable
    exp = SamplesGenerator._process_response_into_experience(None, out, max_len=4096)
    assert int(exp.action_mask.sum()) == sum(e - s for s, e in out["action_ranges"])
    assert exp.labels == [out["label"]]  # what the trainer's PERPO reads
    assert exp.info["gymverse_success"].tolist() == [1.0]
    assert exp.rewards.tolist() == pytest.approx([out["reward"]])


def test_tokenizer_without_chat_template_uses_plain_turns(
    tokenizer: Any, engine_cls: Any, sampling_params: Any
) -> None:
    from transformers import PreTrainedTokenizerFast

    bare = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, eos_token="<|im_end|>")
    row = next(dataset_rows([ENV], 1, seed=5))
    turns = oracle(ENV, 5)
    engine = engine_cls(bare, [a for a, *_ in turns])
    out = run(AgentExecutor(), row["prompt"], row["label"], engine, sampling_params, bare)
    ranges = out["action_ranges"]
    assert len(ranges) == len(turns)
    between = bare.decode(out["observation_tokens"][ranges[0][1] : ranges[1][0]])
    assert between == f"\n\nObservation: {turns[0][1]}\n\nAction:"
    assert out["scores"] == 1.0
    assert out["reward"] == pytest.approx(sum(r for _, _, r, _ in turns))


def test_wrong_answers_give_failure_and_format_penalty(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    row = next(dataset_rows([ENV], 1, seed=2))
    env = gymverse.make(ENV)
    env.reset(seed=2)
    n = env.max_turns
    engine = engine_cls(tokenizer, ["no box here", *[r"\boxed{0}"] * (n - 1)])
    out = run(AgentExecutor(), chat_prompt(tokenizer, row["prompt"]), row["label"], engine, sampling_params, tokenizer)
    assert len(out["action_ranges"]) == n  # truncated by the env's turn limit
    assert out["scores"] == 0.0
    assert out["extra_logs"]["gymverse_success"] == 0.0
    assert out["reward"] <= env.format_penalty + 1e-9  # the malformed first action was penalized


class _Exploding(GuessTheNumber):
    """Raises on its second step (or at reset when asked)."""

    def __init__(self, *args: Any, fail_reset: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fail_reset = fail_reset

    def _reset(self) -> tuple[str, dict[str, Any]]:
        if self.fail_reset:
            raise OSError("disk gone")
        return super()._reset()

    def _step(self, action: str) -> Any:
        if self.turn >= 2:
            raise RuntimeError("boom")
        return super()._step(action)


@pytest.fixture
def exploding_envs() -> Iterator[Any]:
    register("testorlhf:Exploding", _Exploding, override=True)
    register("testorlhf:ExplodingReset", _Exploding, override=True, fail_reset=True)
    yield
    deregister("testorlhf:Exploding")
    deregister("testorlhf:ExplodingReset")


def test_env_error_ends_only_that_episode_with_a_clear_message(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, exploding_envs: Any
) -> None:
    label = EnvLabel("testorlhf:Exploding", 3).to_json()
    engine = engine_cls(tokenizer, [r"\boxed{1}", r"\boxed{2}", r"\boxed{3}"])
    out = run(AgentExecutor(), chat_prompt(tokenizer, "Guess."), label, engine, sampling_params, tokenizer)
    assert len(out["action_ranges"]) == 2  # the failing step ends the episode
    assert out["extra_logs"]["gymverse_error"] == 1.0
    assert out["extra_logs"]["gymverse_success"] == 0.0
    tail = tokenizer.decode(out["observation_tokens"][out["action_ranges"][-1][1] :])
    assert "testorlhf:Exploding (seed 3) failed at turn 2" in tail
    assert "RuntimeError: boom" in tail
    # a healthy episode right after is unaffected
    row = next(dataset_rows([ENV], 1, seed=7))
    turns = oracle(ENV, 7)
    ok = run(
        AgentExecutor(),
        chat_prompt(tokenizer, row["prompt"]),
        row["label"],
        engine_cls(tokenizer, [a for a, *_ in turns]),
        sampling_params,
        tokenizer,
    )
    assert ok["scores"] == 1.0
    assert ok["extra_logs"]["gymverse_error"] == 0.0


def test_reset_failure_ends_episode_at_first_action(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, exploding_envs: Any
) -> None:
    label = EnvLabel("testorlhf:ExplodingReset", 1).to_json()
    engine = engine_cls(tokenizer, [r"\boxed{1}", r"\boxed{2}"])
    out = run(AgentExecutor(), "ignored", label, engine, sampling_params, tokenizer)
    assert len(out["action_ranges"]) == 1
    assert out["reward"] == 0.0
    assert out["extra_logs"]["gymverse_error"] == 1.0
    text = tokenizer.decode(out["observation_tokens"])
    assert "failed at reset" in text
    assert "OSError: disk gone" in text


def test_bad_labels_name_the_problem(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    engine = engine_cls(tokenizer, ["x"])
    with pytest.raises(ValueError, match="not JSON"):
        run(AgentExecutor(), "p", "GuessTheNumber", engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match="'seed' must be an integer"):
        run(AgentExecutor(), "p", json.dumps({"env_id": ENV}), engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match="unknown env 'game:Nope'"):
        run(AgentExecutor(), "p", EnvLabel("game:Nope", 0).to_json(), engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match=r"complexity must be in 1\.\.10"):
        EnvLabel.parse({"env_id": ENV, "seed": 0, "complexity": 11})


def test_token_budget_cut_closes_the_session(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    row = next(dataset_rows([ENV], 1, seed=11))
    prompt = chat_prompt(tokenizer, row["prompt"])
    budget = len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + 3
    engine = engine_cls(tokenizer, [r"\boxed{1}", r"\boxed{2}"])
    before = shared_pool().active
    out = run(AgentExecutor(), prompt, row["label"], engine, sampling_params, tokenizer, max_length=budget)
    assert out["truncated"] is True  # the first action was cut at the budget
    assert len(out["action_ranges"]) == 1
    assert out["scores"] == 0.0
    assert shared_pool().active == before  # the unfinished episode's env slot was released


def test_qwen3_thinking_template_env_turns_and_verbatim_thinking(
    corpus: list[str], engine_cls: Any, sampling_params: Any
) -> None:
    """The real Qwen3 template (which re-renders history without <think>): env turns still carry its user markers,
    the model's thinking stays in its own sequence, and the env sees only the answer (not the decoy in the thought)."""
    qwen3 = tiny_tokenizer(corpus, "qwen3", vocab_size=600)
    row = next(dataset_rows([ENV], 1, seed=11))
    turns = oracle(ENV, 11)
    engine = engine_cls(qwen3, [f"<think>\nmaybe \\boxed{{99}}?\n</think>\n\n{a}" for a, *_ in turns])
    prompt = chat_prompt(qwen3, row["prompt"])
    out = run(AgentExecutor(), prompt, row["label"], engine, sampling_params, qwen3)
    tokens, ranges = out["observation_tokens"], out["action_ranges"]
    assert out["scores"] == 1.0 and len(ranges) == len(turns)  # the env parsed the answers, not the decoys
    for i, (start, end) in enumerate(ranges):
        assert tokens[start:end] == engine.returned[i]  # thinking included, verbatim
        assert engine.prompts[i] == tokens[:start]
    for (_, obs, _, _), (_, end), (nxt, _) in zip(turns, ranges, ranges[1:]):
        assert qwen3.decode(tokens[end:nxt]) == f"\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n"


def test_turn_cap_from_the_gymverse_flags(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, monkeypatch: Any
) -> None:
    from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig

    monkeypatch.setenv(ENV_VAR, GymVerseConfig(max_turns=2).to_json())
    row = next(dataset_rows([ENV], 1, seed=11))
    engine = engine_cls(tokenizer, [r"\boxed{1}"] * 5)
    out = run(AgentExecutor(), chat_prompt(tokenizer, row["prompt"]), row["label"], engine, sampling_params, tokenizer)
    assert len(out["action_ranges"]) == 2 and len(engine.returned) == 2  # the core's turn limit, not the env's
    assert out["scores"] == 0.0


ENV_TURN = {  # what each real template renders for an env (user) turn after the assistant's end-of-turn token
    "llama3": "<|start_header_id|>user<|end_header_id|>\n\n{obs}<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "qwen2.5": "\n<|im_start|>user\n{obs}<|im_end|>\n<|im_start|>assistant\n",  # ChatML
}


@pytest.mark.parametrize("family", ["llama3", "qwen2.5"])
def test_llama3_and_chatml_templates_format_env_turns(
    corpus: list[str], engine_cls: Any, sampling_params: Any, family: Any
) -> None:
    """The real Llama-3 and ChatML (Qwen2.5) templates through the agent: env turns carry the template's user and
    assistant markers around the observation, and the model's turns stay verbatim."""
    tok = tiny_tokenizer(corpus, family, vocab_size=600)
    row = next(dataset_rows([ENV], 1, seed=12))
    turns = oracle(ENV, 12)
    engine = engine_cls(tok, [a for a, *_ in turns])
    out = run(AgentExecutor(), chat_prompt(tok, row["prompt"]), row["label"], engine, sampling_params, tok)
    tokens, ranges = out["observation_tokens"], out["action_ranges"]
    assert out["scores"] == 1.0 and len(ranges) == len(turns)
    for i, (start, end) in enumerate(ranges):
        assert tokens[start:end] == engine.returned[i]
        assert engine.prompts[i] == tokens[:start]
    for (_, obs, _, _), (_, end), (nxt, _) in zip(turns, ranges, ranges[1:]):
        text = obs.strip() if family == "llama3" else obs  # the Llama-3 template trims message content
        assert tok.decode(tokens[end:nxt]) == ENV_TURN[family].format(obs=text)
