"""`GymVerseAgentLoop` end to end on CPU: real tokenizer, real envs, stand-ins only for the generation server."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

GUESS = "game:GuessTheNumber"


def run_episode(kit: Any, tokenizer: Any, server: Any, rows: list[dict], **cfg: Any) -> list[Any]:
    """Run one agent loop per row concurrently, as verl's worker does."""
    config = kit.make_config(**cfg)

    async def main() -> list[Any]:
        loops = [kit.make_agent_loop(config, server, tokenizer) for _ in rows]
        params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
        return list(await asyncio.gather(*(lp.run(dict(params), **r) for lp, r in zip(loops, rows))))

    return asyncio.run(main())


def segments(mask: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each run of 1s."""
    out, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def test_oracle_episodes_succeed_with_consistent_tokens(kit: Any, tokenizer: Any) -> None:
    server = kit.ScriptedServer(tokenizer)
    outs = run_episode(kit, tokenizer, server, [kit.row(GUESS, s) for s in (3, 11, 42)])
    for out in outs:
        ef = out.extra_fields
        assert ef["success"] is True and ef["error"] is None and ef["stop_reason"] == "terminated"
        assert ef["env_id"] == GUESS and ef["complexity"] == 1 and ef["seed"] in (3, 11, 42)
        assert out.reward_score == pytest.approx(sum(ef["turn_rewards"])) == pytest.approx(1.0)
        n = len(out.response_ids)
        assert len(out.response_mask) == len(out.response_logprobs) == n
        segs = segments(out.response_mask)
        assert len(segs) == ef["episode_turns"] == len(ef["turn_rewards"])
        assert out.num_turns == 2 * len(segs)  # first observation + replies + observations in between
        # model tokens are exactly what the server produced for this episode, with its log-probs
        by_request: dict[str, list[dict]] = {}
        for c in server.calls:
            by_request.setdefault(c["request_id"], []).append(c)
        replies = [out.response_ids[a:b] for a, b in segs]
        calls = [cs for cs in by_request.values() if [c["ids"] for c in cs] == replies]
        assert len(calls) == 1, "each episode keeps one request id across its turns"
        for (a, b), call in zip(segs, calls[0]):
            assert out.response_ids[a:b] == call["ids"]
            assert out.response_logprobs[a:b] == pytest.approx(call["logprobs"])
        off = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if not m]
        assert off == [0.0] * len(off)
        # env tokens carry the observations, rendered by the chat template
        env_text = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if not m])
        assert "too" in env_text and "<|im_start|>user" in env_text
        prompt = tokenizer.decode(out.prompt_ids)
        assert prompt.startswith("<|im_start|>system") and "between 1 and 10" in prompt
        assert prompt.endswith("<|im_start|>assistant\n")
    # full sequence = what the server saw last + its last reply
    last = server.calls[-1]
    assert len(tokenizer.encode(last["prompt"], add_special_tokens=False)) > 0


def test_same_seed_same_transcript(kit: Any, tokenizer: Any) -> None:
    a = run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [kit.row(GUESS, 5)])[0]
    b = run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [kit.row(GUESS, 5)])[0]
    assert a.prompt_ids == b.prompt_ids and a.response_ids == b.response_ids
    c = run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [kit.row(GUESS, 6)])[0]
    assert c.response_ids != a.response_ids


def test_response_length_cap_and_random_model(kit: Any, tokenizer: Any) -> None:
    server = kit.TinyLlamaServer(tokenizer, seed=1)
    outs = run_episode(
        kit, tokenizer, server, [kit.row(GUESS, s) for s in (1, 2)], response_length=48, max_tokens_per_turn=10
    )
    for out in outs:
        n = len(out.response_ids)
        assert 0 < n <= 48
        assert len(out.response_mask) == len(out.response_logprobs) == n
        assert max(len(c["ids"]) for c in server.calls) <= 10
        assert out.extra_fields["stop_reason"] in {"length", "truncated", "terminated"}
        assert out.extra_fields["success"] is False  # a random model does not find the number
        # malformed actions cost the env's format penalty, summed into the score
        assert out.reward_score == pytest.approx(sum(out.extra_fields["turn_rewards"]))
        assert min(out.extra_fields["turn_rewards"]) == pytest.approx(-0.1)
        gen = [lp for c in server.calls for lp in c["logprobs"]]
        on = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m]
        assert all(lp < 0 for lp in on) and set(on) <= set(gen)


def test_horizon_caps_turns(kit: Any, tokenizer: Any) -> None:
    server = kit.ScriptedServer(tokenizer, policy=lambda _: "\\boxed{1}")  # always wrong unless the number is 1
    out = run_episode(kit, tokenizer, server, [kit.row(GUESS, 9)], max_turns=2)[0]
    assert out.extra_fields["episode_turns"] == 2 and out.extra_fields["stop_reason"] == "horizon"
    assert len(segments(out.response_mask)) == 2 and out.extra_fields["horizon"] == 2


def test_env_error_ends_episode_not_worker(kit: Any, tokenizer: Any) -> None:
    from gymverse.envs.game.guess_number import GuessTheNumber
    from gymverse.registry import register

    class Exploding(GuessTheNumber):
        def _step(self, action: str) -> Any:
            if self.turn >= 2:  # the second step fails (turn counts the step in progress)
                raise RuntimeError("disk on fire")
            return super()._step(action)

    register("tests:ExplodingGuess", Exploding, override=True)
    server = kit.ScriptedServer(tokenizer, policy=lambda _: "\\boxed{1}")
    rows = [kit.row("tests:ExplodingGuess", 4), kit.row(GUESS, 4)]
    bad, good = run_episode(kit, tokenizer, server, rows)
    assert bad.extra_fields["stop_reason"] == "env_error" and "disk on fire" in bad.extra_fields["error"]
    assert bad.extra_fields["success"] is False and len(bad.extra_fields["turn_rewards"]) == 2
    assert len(bad.response_ids) == len(bad.response_mask) > 0
    assert good.extra_fields["error"] is None


def test_unknown_env_is_error_truncated(kit: Any, tokenizer: Any) -> None:
    out = run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [kit.row("nope:Missing", 1)])
    ef = out[0].extra_fields
    assert ef["stop_reason"] == "env_error" and "nope:Missing" in ef["error"]
    assert out[0].response_mask == [0] and out[0].reward_score == 0.0


def test_row_without_env_id_is_rejected(kit: Any, tokenizer: Any) -> None:
    bad = {"agent_name": "gymverse_agent", "extra_info": {"seed": 1}, "raw_prompt": []}
    with pytest.raises(ValueError, match="env id"):
        run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [bad])


def test_generation_server_failure_is_not_hidden(kit: Any, tokenizer: Any) -> None:
    class DownServer:
        async def generate(self, request_id: str, **kw: Any) -> Any:
            raise ConnectionError("rollout server gone")

    # only env failures become truncated episodes; a dead server must fail the sample so verl can retry or stop
    with pytest.raises(ConnectionError, match="rollout server gone"):
        run_episode(kit, tokenizer, DownServer(), [kit.row(GUESS, 1)])


def test_qwen3_thinking_template_keeps_generated_ids(kit: Any, tokenizer: Any) -> None:
    """The real Qwen3 template, with enable_thinking from the dataset config: trained ids are the generated ids,
    env turns carry the template's user markers, and the env sees the answer, not the decoy in the thought."""
    qwen3 = kit.family_tokenizer("qwen3")
    server = kit.ScriptedServer(qwen3, policy=lambda p: "<think>\nnot \\boxed{99}\n</think>\n\n" + kit.guess_policy(p))
    config = kit.make_config()
    config.data.apply_chat_template_kwargs = {"enable_thinking": False}

    async def main() -> Any:
        return await kit.make_agent_loop(config, server, qwen3).run({}, **kit.row(GUESS, 3))

    out = asyncio.run(main())
    assert out.extra_fields["success"] is True
    segs = segments(out.response_mask)
    assert [out.response_ids[a:b] for a, b in segs] == [c["ids"] for c in server.calls]  # verbatim, thinking included
    prompt = str(qwen3.decode(out.prompt_ids))
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # enable_thinking=False reached it
    for (_, end), (nxt, _) in itertools.pairwise(segs):
        env = str(qwen3.decode(out.response_ids[end:nxt]))
        assert env.startswith("\n<|im_start|>user\n")
        assert env.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_server_extra_fields_survive_for_verl_metrics(kit: Any, tokenizer: Any) -> None:
    """verl tags each trajectory with extra_fields' min/max_global_steps and `_compute_metrics` casts them to int:
    the agent loop must keep what the server returned (first turn's version as min, last turn's as max)."""
    import numpy as np

    class Bumping(kit.ScriptedServer):  # the weights version advances after the first reply (partial rollout)
        async def generate(self, request_id: str, **kw: Any) -> Any:
            out = await super().generate(request_id, **kw)
            self.global_steps += 1
            return out

    server = Bumping(tokenizer)
    server.global_steps = 7
    out = run_episode(kit, tokenizer, server, [{**kit.row(GUESS, 3), "global_steps": 7}])[0]
    ef = out.extra_fields
    assert len(server.calls) >= 2
    assert ef["global_steps"] == 7 and ef["min_global_steps"] == 7
    assert ef["max_global_steps"] == 7 + len(server.calls) - 1
    assert ef["env_id"] == GUESS and ef["turn_rewards"]  # ours are added next to the server's
    # exactly the expressions of verl's AgentLoopWorkerTQ._agent_loop_postprocess tags and PPOTrainer._compute_metrics
    tags = [{"min_global_steps": ef.get("min_global_steps"), "max_global_steps": ef.get("max_global_steps")}]
    spans = np.array([t["max_global_steps"] for t in tags], dtype=int) - np.array(
        [t["min_global_steps"] for t in tags], dtype=int
    )
    assert spans.tolist() == [len(server.calls) - 1]


def test_env_failing_at_reset_still_carries_the_weights_version(kit: Any, tokenizer: Any) -> None:
    """No server call happened: the row's global_steps (verl passes it to every agent loop) fills the tags."""
    server = kit.ScriptedServer(tokenizer)
    out = run_episode(kit, tokenizer, server, [{**kit.row("no:SuchEnv", 1), "global_steps": 4}])[0]
    assert server.calls == []
    ef = out.extra_fields
    assert (ef["global_steps"], ef["min_global_steps"], ef["max_global_steps"]) == (4, 4, 4)


@pytest.mark.parametrize("family", ["qwen3", "llama3"])
def test_prompt_over_prompt_length_fails_loudly(kit: Any, family: str) -> None:
    """verl's own loops left-truncate an over-long prompt with a log line; GymVerse refuses, naming the limit."""
    tok = kit.family_tokenizer(family)
    server = kit.ScriptedServer(tok, tail=tok.eos_token)
    ok = run_episode(kit, tok, server, [kit.row(GUESS, 3)], prompt_length=512)[0]
    n = ok.extra_fields["prompt_tokens"]
    assert n == len(ok.prompt_ids) and ok.extra_fields["success"] is True
    assert tok.decode(ok.prompt_ids).count(tok.eos_token) >= 1  # the template's turn markers are in the prompt
    with pytest.raises(ValueError, match=rf"{n} tokens, more than actor_rollout_ref.rollout.prompt_length={n - 1}"):
        run_episode(kit, tok, kit.ScriptedServer(tok, tail=tok.eos_token), [kit.row(GUESS, 3)], prompt_length=n - 1)


def test_llama3_template_episode_keeps_generated_ids(kit: Any, tokenizer: Any) -> None:
    """Llama-3's template (bos, header markers, <|eot_id|>): trained ids are the generated ids, env turns are
    user headers."""
    tok = kit.family_tokenizer("llama3")
    server = kit.ScriptedServer(tok, tail="<|eot_id|>")
    out = run_episode(kit, tok, server, [kit.row(GUESS, 11)])[0]
    assert out.extra_fields["success"] is True
    segs = segments(out.response_mask)
    assert [out.response_ids[a:b] for a, b in segs] == [c["ids"] for c in server.calls]
    assert tok.decode(out.prompt_ids).startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    for (_, end), (nxt, _) in itertools.pairwise(segs):
        env = tok.decode(out.response_ids[end:nxt])
        assert env.startswith("<|start_header_id|>user<|end_header_id|>\n\n")
        assert env.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
