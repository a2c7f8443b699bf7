"""The agent executor with a real tokenizer: scripted replies (`ScriptedEngine`) and the vLLM stand-in inside
OpenRLHF's real `RolloutRayActor.generate`; every response goes through OpenRLHF's own conversion into a sample."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import gymverse
import pytest
from gymverse.envs.game.guess_number import GuessTheNumber
from gymverse.pool import shared_pool
from gymverse.registry import deregister, register
from gymverse.rollout.batch import EpisodeRecord
from gymverse.rollout.dataset import EpisodeSpec, episode_specs
from gymverse.testing import tiny_tokenizer
from gymverse_openrlhf.agent_func import AgentExecutor
from gymverse_openrlhf.cli import initial_observation
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

ENV = "game:GuessTheNumber"


def dataset_rows(
    env_ids: list[str], n: int, *, seed: int = 0, complexity: int | None = None
) -> Iterator[dict[str, str]]:
    """Rows as `gymverse-openrlhf make-dataset` writes them."""
    for s in episode_specs(env_ids, n, seed=seed, complexity=complexity):
        yield {"prompt": initial_observation(s.env_id, s.seed, s.complexity), "label": json.dumps(s.to_dict())}


def label_of(env_id: str, seed: int, **kw: Any) -> str:
    return json.dumps(EpisodeSpec(env_id, seed, **kw).to_dict())


def returned(out: dict[str, Any]) -> tuple[EpisodeSpec, EpisodeRecord]:
    """The row and the episode record the agent returned in the label."""
    data = json.loads(out["label"])
    return EpisodeSpec.from_dict({k: v for k, v in data.items() if k != "episode"}), EpisodeRecord.from_dict(
        data["episode"]
    )


def sample(out: dict[str, Any], max_len: int = 4096) -> Any:
    """OpenRLHF's own conversion of an executor response into a training sample."""
    return SamplesGenerator._process_response_into_experience(None, out, max_len=max_len)


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
    # the label comes back as it was, plus the episode's record for the trainer's PERPO
    spec, record = returned(out)
    assert spec == EpisodeSpec.from_dict(json.loads(label))
    assert record.turn_rewards == tuple(r for _, _, r, _ in turns)
    assert record.stop_reason == "terminated" and record.success and record.trained
    level = complexity or gymverse.make(ENV).complexity
    assert out["extra_logs"] == {
        "gymverse_env_index": 0,
        "gymverse_complexity": level,
        "gymverse_success": 1.0,
        "gymverse_turns": len(turns),
        "gymverse_error": 0.0,
    }
    # OpenRLHF's own conversion into a training sample keeps exactly the action tokens trainable
    exp = sample(out)
    assert int(exp.action_mask.sum()) == sum(e - s for s, e in out["action_ranges"])
    assert exp.labels == [out["label"]]  # what the trainer's PERPO reads
    assert out["rollout_log_probs"] is None  # not asked (SamplingParams.logprobs None): vLLM returns none
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


def assert_void(out: dict[str, Any], stop_reason: str) -> None:
    """A void episode: no action token in OpenRLHF's sample, reward 0, recorded as void (not a curriculum result)."""
    _, record = returned(out)
    assert record.stop_reason == stop_reason and record.void and not record.trained
    assert out["action_ranges"] == [] and out["reward"] == 0.0 and out["extra_logs"]["gymverse_error"] == 1.0
    exp = sample(out)
    assert int(exp.action_mask.sum()) == 0 and exp.action_mask.shape[1] >= 1  # OpenRLHF trains no token of it
    assert exp.response_length.tolist() == [0]


def test_env_error_voids_only_that_episode(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, exploding_envs: Any
) -> None:
    engine = engine_cls(tokenizer, [r"\boxed{1}", r"\boxed{2}", r"\boxed{3}"])
    label = label_of("testorlhf:Exploding", 3)
    out = run(AgentExecutor(), chat_prompt(tokenizer, "Guess."), label, engine, sampling_params, tokenizer)
    assert len(engine.returned) == 2  # the failing second step ends the episode
    assert_void(out, "env_error")
    assert returned(out)[1].turn_rewards == (0.0, 0.0)
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
    assert ok["scores"] == 1.0 and ok["extra_logs"]["gymverse_error"] == 0.0


def test_reset_failure_generates_nothing_and_trains_nothing(
    tokenizer: Any, engine_cls: Any, sampling_params: Any, exploding_envs: Any
) -> None:
    """The stale dataset prompt is never answered: no generation, a placeholder with no action token."""
    engine = engine_cls(tokenizer, [])
    label = label_of("testorlhf:ExplodingReset", 1)
    out = run(AgentExecutor(), chat_prompt(tokenizer, "stale prompt"), label, engine, sampling_params, tokenizer)
    assert engine.prompts == []
    assert_void(out, "reset_error")
    assert len(out["observation_tokens"]) == 2


def test_hung_env_with_default_settings_ends_within_the_step_timeout(
    tokenizer: Any, engine_cls: Any, sampling_params: Any
) -> None:
    """`vectest:Hang` blocks 60 s at its second step; the default 30 s step timeout voids the episode."""
    import gymverse.testing.vectest  # noqa: F401  (registers vectest:)
    from gymverse.pool import DEFAULT_STEP_TIMEOUT

    engine = engine_cls(tokenizer, [r"\boxed{1}"] * 5)
    started = time.monotonic()
    out = run(AgentExecutor(), "Reach it.", label_of("vectest:Hang", 1), engine, sampling_params, tokenizer)
    elapsed = time.monotonic() - started
    assert DEFAULT_STEP_TIMEOUT == 30.0 and elapsed < DEFAULT_STEP_TIMEOUT + 8, elapsed
    assert_void(out, "env_error")
    assert len(engine.returned) == 2  # the second step hung


def test_bad_labels_name_the_problem(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    engine = engine_cls(tokenizer, ["x"])
    with pytest.raises(ValueError, match="must be a mapping with env_id and seed, got 'GuessTheNumber'"):
        run(AgentExecutor(), "p", "GuessTheNumber", engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match="seed must be an integer"):
        run(AgentExecutor(), "p", json.dumps({"env_id": ENV, "seed": "x"}), engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match=r"unknown env id\(s\) \['game:Nope'\]"):
        run(AgentExecutor(), "p", label_of("game:Nope", 0), engine, sampling_params, tokenizer)
    with pytest.raises(ValueError, match="unknown field"):
        run(
            AgentExecutor(), "p", json.dumps({"env_id": ENV, "seed": 0, "level": 2}), engine, sampling_params, tokenizer
        )


def test_token_budget_is_openrlhfs_max_len(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    row = next(dataset_rows([ENV], 1, seed=11))
    prompt = chat_prompt(tokenizer, row["prompt"])
    budget = len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + 3
    engine = engine_cls(tokenizer, [r"\boxed{1}", r"\boxed{2}"])
    before = shared_pool().active
    out = run(AgentExecutor(), prompt, row["label"], engine, sampling_params, tokenizer, max_length=budget)
    assert out["truncated"] is True  # the first action was cut at the budget
    assert len(out["observation_tokens"]) == budget and len(out["action_ranges"]) == 1
    assert returned(out)[1].stop_reason == "length" and out["scores"] == 0.0  # a length cut is trained
    assert int(sample(out, max_len=budget).action_mask.sum()) == 3
    assert shared_pool().active == before  # the unfinished episode's env slot was released
    with pytest.raises(ValueError, match=r"leaves no room within --data\.max_len"):
        run(AgentExecutor(), prompt, row["label"], engine_cls(tokenizer, []), sampling_params, tokenizer, max_length=5)


def test_max_new_tokens_caps_each_reply(tokenizer: Any, engine_cls: Any, sampling_params: Any) -> None:
    row = next(dataset_rows([ENV], 1, seed=11))
    sampling_params.max_tokens = 2  # what OpenRLHF sets from --rollout.max_new_tokens
    engine = engine_cls(tokenizer, [r"\boxed{1}"] * 30)
    out = run(AgentExecutor(), chat_prompt(tokenizer, row["prompt"]), row["label"], engine, sampling_params, tokenizer)
    assert all(e - s <= 2 for s, e in out["action_ranges"]) and out["truncated"] is True


def stand_in_episode(actor: Any, tok: Any, sampling_params: Any, **kw: Any) -> dict[str, Any]:
    """One GuessTheNumber episode on the vLLM stand-in inside OpenRLHF's real `RolloutRayActor.generate`."""
    row = next(dataset_rows([ENV], 1, seed=3))
    return run(AgentExecutor(), chat_prompt(tok, row["prompt"]), row["label"], actor, sampling_params, tok, **kw)


def test_stand_in_logprobs_only_when_asked(tokenizer: Any, rollout: Any, sampling_params: Any) -> None:
    out = stand_in_episode(rollout(), tokenizer, sampling_params)
    assert out["rollout_log_probs"] is None and out["scores"] == 1.0
    sampling_params.logprobs = 1  # OpenRLHF sets it with --algo.advantage.is_correction_level token|seq
    out = stand_in_episode(rollout(), tokenizer, sampling_params)
    lp = out["rollout_log_probs"]
    assert len(lp) == len(out["observation_tokens"])
    for start, end in out["action_ranges"]:
        assert lp[start:end] == pytest.approx([-0.25 - 0.01 * i for i in range(end - start)])
    assert sum(1 for v in lp if v != 0.0) == sum(e - s for s, e in out["action_ranges"])  # 0 off the replies
    exp = sample(out)
    assert exp.rollout_log_probs.shape == exp.action_mask.shape


@pytest.mark.parametrize(
    ("fault", "stop_reason"), [("abort", "generation_aborted"), ("engine_error", "generation_error")]
)
def test_stand_in_abort_and_engine_error_void_the_episode(
    tokenizer: Any, rollout: Any, sampling_params: Any, fault: str, stop_reason: str
) -> None:
    actor = rollout()
    actor.llm.faults = [None, fault]  # the first reply is fine, the second request fails
    out = stand_in_episode(actor, tokenizer, sampling_params)
    assert_void(out, stop_reason)
    assert out["scores"] == 0.0 and len(returned(out)[1].turn_rewards) == 1


def test_stand_in_context_length_error_is_a_generation_error(
    tokenizer: Any, rollout: Any, sampling_params: Any, caplog: Any
) -> None:
    """vLLM's max_model_len smaller than the episode's budget: vLLM rejects the request (a ValueError)."""
    out = stand_in_episode(rollout(max_model_len=20), tokenizer, sampling_params)
    assert_void(out, "generation_error")
    assert "VLLMValidationError: The decoder prompt (length" in caplog.text


def test_stand_in_dead_engine_fails_the_rollout(tokenizer: Any, rollout: Any, sampling_params: Any) -> None:
    from vllm.v1.engine.exceptions import EngineDeadError

    actor = rollout()
    actor.llm.faults = ["dead"]
    with pytest.raises(EngineDeadError):
        stand_in_episode(actor, tokenizer, sampling_params)


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
    from gymverse_openrlhf.config import ENV_VAR, split_argv

    monkeypatch.setenv(ENV_VAR, split_argv(["--gymverse.max_turns", "2"])[0].to_json())
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
