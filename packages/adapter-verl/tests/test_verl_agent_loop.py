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
    from gymverse.rollout import EpisodeRecord

    server = kit.ScriptedServer(tokenizer)
    outs = run_episode(kit, tokenizer, server, [kit.row(GUESS, s) for s in (3, 11, 42)])
    for out in outs:
        ef = out.extra_fields["gymverse"]
        assert EpisodeRecord.from_dict(ef).to_dict() == ef  # exactly core's record, nothing else
        assert ef["success"] is True and out.extra_fields["error"] is None and ef["stop_reason"] == "terminated"
        assert ef["env_id"] == GUESS and ef["level"] == 1 and ef["seed"] in (3, 11, 42)
        assert out.reward_score == pytest.approx(sum(ef["turn_rewards"])) == pytest.approx(1.0)
        n = len(out.response_ids)
        assert len(out.response_mask) == len(out.response_logprobs) == n
        segs = segments(out.response_mask)
        assert len(segs) == len(ef["turn_rewards"]) and [b for _, b in segs] == ef["turn_ends"]
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
        ef = out.extra_fields["gymverse"]
        assert ef["stop_reason"] in {"length", "truncated", "terminated"}
        assert ef["success"] is False  # a random model does not find the number
        # malformed actions cost the env's format penalty, summed into the score
        assert out.reward_score == pytest.approx(sum(ef["turn_rewards"]))
        assert min(ef["turn_rewards"]) == pytest.approx(-0.1)
        gen = [lp for c in server.calls for lp in c["logprobs"]]
        on = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m]
        assert all(lp < 0 for lp in on) and set(on) <= set(gen)


def test_horizon_caps_turns(kit: Any, tokenizer: Any) -> None:
    server = kit.ScriptedServer(tokenizer, policy=lambda _: "\\boxed{1}")  # always wrong unless the number is 1
    out = run_episode(kit, tokenizer, server, [kit.row(GUESS, 9)], max_turns=2)[0]
    ef = out.extra_fields["gymverse"]
    assert len(ef["turn_rewards"]) == 2 and ef["stop_reason"] == "horizon"
    assert len(segments(out.response_mask)) == 2  # a horizon cut is trained (gymverse.failures)


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
    ef = bad.extra_fields["gymverse"]
    assert ef["stop_reason"] == "env_error" and "disk on fire" in bad.extra_fields["error"]
    assert ef["success"] is False and len(ef["turn_rewards"]) == 2
    # void (gymverse.failures): the tokens stay (verl needs the row) but none is trained
    assert len(bad.response_ids) == len(bad.response_mask) > 0 and set(bad.response_mask) == {0}
    assert good.extra_fields["error"] is None and 1 in good.response_mask


def test_unknown_env_is_error_truncated(kit: Any, tokenizer: Any) -> None:
    out = run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [kit.row("nope:Missing", 1)])
    ef = out[0].extra_fields["gymverse"]
    assert ef["stop_reason"] == "reset_error" and "nope:Missing" in out[0].extra_fields["error"]
    assert out[0].response_mask == [0] and out[0].reward_score == 0.0 and ef["turn_rewards"] == []


def test_row_without_env_id_is_rejected(kit: Any, tokenizer: Any) -> None:
    bad = {"agent_name": "gymverse_agent", "extra_info": {"seed": 1}, "raw_prompt": []}
    # core's EpisodeSpec.from_dict lets the missing env_id through as a TypeError naming it (not a ValueError)
    with pytest.raises((TypeError, ValueError), match="env_id"):
        run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [bad])
    typo = {**kit.row(GUESS, 1), "extra_info": {"env_id": GUESS, "sede": 1}}
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['sede'\]"):
        run_episode(kit, tokenizer, kit.ScriptedServer(tokenizer), [typo])


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
    assert out.extra_fields["gymverse"]["success"] is True
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
    assert ef["gymverse"]["env_id"] == GUESS and ef["gymverse"]["turn_rewards"]  # ours next to the server's
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
    n = len(ok.prompt_ids)
    assert ok.extra_fields["gymverse"]["success"] is True
    assert tok.decode(ok.prompt_ids).count(tok.eos_token) >= 1  # the template's turn markers are in the prompt
    with pytest.raises(ValueError, match=rf"{n} tokens, more than actor_rollout_ref.rollout.prompt_length={n - 1}"):
        run_episode(kit, tok, kit.ScriptedServer(tok, tail=tok.eos_token), [kit.row(GUESS, 3)], prompt_length=n - 1)


def test_llama3_template_episode_keeps_generated_ids(kit: Any, tokenizer: Any) -> None:
    """Llama-3's template (bos, header markers, <|eot_id|>): trained ids are the generated ids, env turns are
    user headers."""
    tok = kit.family_tokenizer("llama3")
    server = kit.ScriptedServer(tok, tail="<|eot_id|>")
    out = run_episode(kit, tok, server, [kit.row(GUESS, 11)])[0]
    assert out.extra_fields["gymverse"]["success"] is True
    segs = segments(out.response_mask)
    assert [out.response_ids[a:b] for a, b in segs] == [c["ids"] for c in server.calls]
    assert tok.decode(out.prompt_ids).startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>")
    for (_, end), (nxt, _) in itertools.pairwise(segs):
        env = tok.decode(out.response_ids[end:nxt])
        assert env.startswith("<|start_header_id|>user<|end_header_id|>\n\n")
        assert env.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_hung_env_ends_its_episode_within_the_default_step_timeout(kit: Any, tokenizer: Any) -> None:
    """`vectest:Hang` blocks 60 s in its second step; with default settings (core's 30 s step timeout) the episode
    ends void (env_error) after the timeout, on the agent loop's real session path, and the other episode is fine."""
    import time

    import gymverse.testing.vectest  # noqa: F401  (registers vectest:*)
    from gymverse.pool import DEFAULT_STEP_TIMEOUT, shared_pool

    server = kit.ScriptedServer(tokenizer, policy=lambda _: "\\boxed{1}")
    start = time.monotonic()
    hung, ok = run_episode(kit, tokenizer, server, [kit.row("vectest:Hang", 1), kit.row("vectest:Count", 1)])
    elapsed = time.monotonic() - start
    assert shared_pool().step_timeout == DEFAULT_STEP_TIMEOUT == 30.0
    assert DEFAULT_STEP_TIMEOUT <= elapsed < DEFAULT_STEP_TIMEOUT + 15, elapsed
    ef = hung.extra_fields["gymverse"]
    assert ef["stop_reason"] == "env_error" and "step_timeout=30.0s" in hung.extra_fields["error"]
    assert set(hung.response_mask) == {0} and len(ef["turn_rewards"]) == 2
    assert ok.extra_fields["gymverse"]["stop_reason"] != "env_error" and 1 in ok.response_mask


class RayServer:
    """verl calls its server replicas through Ray: errors arrive as ``RayTaskError``s wrapping the server's."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def generate(self, request_id: str, **kw: Any) -> Any:
        return await self.actor.generate.remote(request_id, **kw)


@pytest.mark.usefixtures("ray_cluster")
def test_aborted_and_refused_generations_are_void_and_not_curriculum_outcomes(kit: Any, tokenizer: Any) -> None:
    """The scripted server aborts a request like vLLM (no tokens, ``stop_reason="aborted"``) and refuses one for
    the context length like verl's vLLM server, through a Ray actor: both episodes end void
    (generation_aborted / generation_error), no token trained, neither recorded by the curriculum."""
    import sys
    import uuid

    import ray
    from gymverse_verl.settings import GymVerseSettings

    def policy(prompt: str) -> str:
        n = prompt.count("<|im_start|>assistant")  # the turn being asked for
        if "abort-me" in prompt and n == 2:
            return kit.ABORT
        if "refuse-me" in prompt and n == 2:
            return kit.CONTEXT_FULL
        return kit.guess_policy(prompt)

    ray.cloudpickle.register_pickle_by_value(sys.modules[kit.ScriptedServer.__module__])
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    actor = ray.remote(kit.ScriptedServer).options(num_cpus=0).remote(tokenizer, policy=policy)
    cfg = {"evolve": True, "actor_name": f"cur-{uuid.uuid4().hex[:8]}"}
    rows = [kit.row(GUESS, 5), kit.row(GUESS, 5), kit.row(GUESS, 5)]
    prompts = ["abort-me", "refuse-me", "play well"]
    outs = _run_with_prompts(kit, tokenizer, RayServer(actor), rows, prompts, cfg)
    aborted, refused, fine = (o.extra_fields for o in outs)
    assert aborted["gymverse"]["stop_reason"] == "generation_aborted"
    assert refused["gymverse"]["stop_reason"] == "generation_error"
    assert "maximum context length" in refused["error"] and "Traceback" not in refused["error"]
    assert fine["gymverse"]["stop_reason"] == "terminated" and fine["gymverse"]["success"] is True
    for out in outs[:2]:
        assert set(out.response_mask) == {0} and len(out.response_mask) == len(out.response_ids)
        assert len(out.extra_fields["gymverse"]["turn_rewards"]) == 1  # the first reply was played, then void
    service = GymVerseSettings.from_dict(cfg).curriculum_service()
    report = service.end_step()
    assert report.episodes == 1 and report.success == {GUESS: 1.0}  # only the played-out episode counts
    service.stop()


def _run_with_prompts(kit: Any, tokenizer: Any, server: Any, rows: list, prompts: list[str], cfg: dict) -> list:
    """One agent loop per row, each with its own system prompt (how the scripted policy tells them apart)."""

    async def main() -> list[Any]:
        loops = [kit.make_agent_loop(kit.make_config(system_prompt=p, **cfg), server, tokenizer) for p in prompts]
        return list(await asyncio.gather(*(lp.run({"logprobs": True}, **r) for lp, r in zip(loops, rows))))

    return asyncio.run(main())


def test_log_probs_only_when_asked(kit: Any, tokenizer: Any) -> None:
    """vLLM returns log-probs only when the request asks for them (verl: ``rollout.calculate_log_probs``)."""
    config = kit.make_config()

    async def main() -> Any:
        return await kit.make_agent_loop(config, kit.ScriptedServer(tokenizer), tokenizer).run({}, **kit.row(GUESS, 3))

    out = asyncio.run(main())
    assert out.response_logprobs is None and out.extra_fields["gymverse"]["success"] is True


def test_standin_contract_matches_verls_vllm_server(kit: Any) -> None:
    """The scripted server's abort and context-length answers are the ones verl 0.9.1's vLLM server gives (its
    module needs vllm, so its source is checked), and the abort maps to core's ``finish_reason="abort"``."""
    import importlib.util
    import re
    from pathlib import Path

    from gymverse_verl.agent_loop import CONTEXT_LENGTH_ERROR, to_generation
    from verl.workers.rollout.replica import TokenOutput

    spec = importlib.util.find_spec("verl.workers.rollout.vllm_rollout")
    assert spec is not None and spec.submodule_search_locations
    source = (Path(next(iter(spec.submodule_search_locations))) / "vllm_async_server.py").read_text()
    assert "if not final_res.outputs:" in source and 'stop_reason="aborted"' in source
    assert 'if finish_reason == "abort":\n            stop_reason = "aborted"' in source
    template = re.search(r'f"Prompt length \(\{len\(prompt_ids\)\}\) leaves no room.*?headroom\."', source, re.S)
    assert template is not None
    rendered = re.sub(r'"\s+f"', "", template.group(0)).replace("{len(prompt_ids)}", "7")
    rendered = rendered.replace("{self.config.max_model_len}", "7")[2:-1]
    assert str(kit.context_length_error(7, 7)) == rendered and CONTEXT_LENGTH_ERROR in rendered
    sglang = Path(next(iter(spec.submodule_search_locations))).parent / "sglang_rollout" / "async_sglang_server.py"
    assert CONTEXT_LENGTH_ERROR in sglang.read_text()
    gen = to_generation(TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted"))
    assert gen.aborted and list(gen.token_ids) == [] and gen.logprobs is None
    assert not to_generation(TokenOutput(token_ids=[1], log_probs=[-0.1], stop_reason="completed")).aborted
