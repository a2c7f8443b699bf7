"""oat (oat-llm 0.2.4): GymVerse's actor and PERPO step against oat's own paths, in oat's environment.

    .venv-oat/bin/python benchmarks/frameworks/bench_oat.py [--quick] [--gpu] [--rounds N]

**Rollout overhead.** oat 0.2.4 has no concrete multi-turn actor (``PPOMultiTurnActor.collect_experience`` is
abstract; its users bring their own env loop), so the native arm is oat's single-turn ``PPOActor.step``: one vLLM
call for the batch of prompts, the reward oracle, ``TransitionData`` per response, serialized to plasma. Its oracle
scores each response with the same GymVerse env (reset at the row's seed, one step): one turn per episode.

* ``oat_native``: ``PPOActor.step(prompts, formatted_prompts, references)`` on N prompts (N single-turn episodes);
* ``gymverse``: ``GymVerseActor.step()`` (oat's ``PPOMultiTurnActor.step`` with the adapter's ``collect_experience``:
  N concurrent core-runner episodes, their generations batched into one engine call per wave).

Both actors are built by oat's own ``ActorBase.__init__``/``init`` (real plasma store, oat's sampling params); the
engine (``vllm.LLM``, GPU) is a scripted one answering instantly with a fixed reply as vLLM ``RequestOutput``s.
Per-turn cost = wall time / engine completions.

**Advantage step.** On the same batch of multi-turn episodes (4 turns each, 4 envs; 4k and 64k transitions):
oat's own multi-turn estimator (``PPOMultiTurnLearner.process_feedback_data``: REINFORCE returns per episode,
subsampling, buffer), the adapter's hook (``GymVerseLearner.perpo``: PERPO with per-env statistics all-reduced
through oat's strategy, then the same subsampling), and, for reference, oat's single-turn GRPO estimator
(``PPOLearner.compute_monte_carlo_advantages`` with ``critic_type=grpo``) on the same number of rewards.

``--gpu`` swaps the scripted engine for a randomly initialised Qwen2-0.5B-shaped model generating with
transformers on CUDA (skipped with a message without CUDA). Writes ``results/frameworks/oat.json``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1] / "packages" / "adapter-oat" / "tests"
# vLLM and dm-launchpad cannot install here: the adapter tests' stand-ins provide their modules (vLLM's types).
sys.path[:0] = [str(HERE), str(TESTS / "standins"), str(TESTS)]
os.environ.setdefault("DS_ACCELERATOR", "cpu")
warnings.filterwarnings("ignore", message="Plasma is deprecated")  # oat's transport; nothing for us to change

import torch  # noqa: E402
from common import Target, base_parser, interleaved, progress, rounds_of  # noqa: E402
from scripted import (  # noqa: E402
    REPLIES,
    Clock,
    adv_targets,
    case_rows,
    concurrency_of,
    envs_of,
    episodes_per_sample,
    gpu_model,
    reply_ids,
    report,
    turn_targets,
)

PACKAGES = ("oat-llm", "gymverse-adapter-oat", "torch", "transformers")


class ScriptedLLM:
    """Stands in for ``vllm.LLM`` (GPU): answers every prompt at once with a fixed reply, as vLLM's outputs."""

    reply: list[int] = []
    completions = 0

    def __init__(self, model: str, seed: int = 0, **engine_args: Any) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def _reply(self, prompt_ids: list[int], params: Any) -> list[int]:
        return list(ScriptedLLM.reply)

    def generate(
        self,
        prompts: list[str] | None = None,
        sampling_params: Any = None,
        prompt_token_ids: list[list[int]] | None = None,
        lora_request: Any = None,
        use_tqdm: bool = True,
    ) -> list[Any]:
        import vllm
        from vllm import CompletionOutput, Logprob, RequestOutput

        if prompt_token_ids is None:  # vLLM tokenizes text prompts itself
            prompt_token_ids = [self.tokenizer(p).input_ids for p in prompts or []]
        per_prompt = sampling_params if isinstance(sampling_params, list) else None
        out = []
        for i, pids in enumerate(prompt_token_ids):
            params = per_prompt[i] if per_prompt is not None else sampling_params or vllm.SamplingParams()
            samples = []
            for k in range(params.n):
                ids = self._reply(list(pids), params)[: params.max_tokens or None]
                lps = [{t: Logprob(-0.1, 1)} for t in ids] if params.logprobs is not None else None
                text = str(self.tokenizer.decode(ids, skip_special_tokens=True))
                samples.append(CompletionOutput(k, text, ids, -0.1 * len(ids), lps, "stop"))
            out.append(RequestOutput(str(i), prompts[i] if prompts else None, list(pids), samples))
            ScriptedLLM.completions += params.n
        return out


class TransformersLLM(ScriptedLLM):
    """``--gpu``: a randomly initialised Qwen2-0.5B-shaped model generating with transformers on CUDA."""

    model: Any = None

    def __init__(self, model: str, seed: int = 0, **engine_args: Any) -> None:
        super().__init__(model, seed)
        if TransformersLLM.model is None:
            TransformersLLM.model = gpu_model(self.tokenizer)

    @torch.no_grad()
    def _reply(self, prompt_ids: list[int], params: Any) -> list[int]:
        out = TransformersLLM.model.generate(
            torch.tensor([prompt_ids], device="cuda"), max_new_tokens=min(params.max_tokens or 32, 32), do_sample=True
        )
        return [int(i) for i in out[0, len(prompt_ids) :]]


class EnvOracle:
    """oat's reward-oracle contract (``get_reward(inputs, responses, references)``) scoring with a GymVerse env.

    Each reference is ``{"env_id", "seed"}``: the env is reset at that seed and stepped once with the response
    (a single-turn episode). One env object per env id is reused, like oat's stateless math/countdown oracles.
    """

    def __init__(self) -> None:
        self.envs: dict[str, Any] = {}

    def get_reward(self, inputs: list[str], responses: list[str], references: list[str], batch_size: int = 4) -> Any:
        import gymverse

        rewards = []
        for response, ref in zip(responses, references):
            spec = json.loads(ref)
            env = self.envs.get(spec["env_id"]) or self.envs.setdefault(spec["env_id"], gymverse.make(spec["env_id"]))
            env.reset(seed=spec["seed"])
            rewards.append(float(env.step(response)[1]))
        return torch.tensor(rewards), {}


def start_plasma(stack: Any) -> Any:
    """A real plasma store (oat's actor -> learner transport) and oat's server handle for it."""
    from oat.utils.ipc import PlasmaShmServer
    from pyarrow import plasma

    path, _ = stack.enter_context(plasma.start_plasma_store(plasma_store_memory=256 * 1000 * 1000))
    server = PlasmaShmServer(size_mb=256)
    server._shm_path = path
    return server


def make_actors(model_dir: Path, server: Any, env_id: str, n: int, llm: type[ScriptedLLM]) -> dict[str, Any]:
    """oat's `PPOActor` and the adapter's `GymVerseActor`, built and initialised by oat's own code."""
    import vllm
    from gymverse_oat.actor import GymVerseActor
    from gymverse_oat.args import GymVerseArgs
    from oat.algorithms.ppo import PPOActor, PPOArgs

    vllm.LLM = llm  # type: ignore[misc, assignment]  # the GPU engine: the one part replaced
    common_args = {
        "pretrain": str(model_dir),
        "generate_max_length": 64,
        "temperature": 1.0,
        "seed": 7,
        "num_samples": 1,
    }
    native = PPOActor(server, {"model": str(model_dir)}, PPOArgs(**common_args, oracle=""))
    native.init(0, str(model_dir))
    native.oracle = EnvOracle()
    gv_args = GymVerseArgs(**common_args, env_id=env_id, num_env=n, rollout_batch_size_per_device=1)
    gymverse = GymVerseActor(server, {"model": str(model_dir)}, gv_args)
    gymverse.init(0, str(model_dir))
    return {"oat_native": native, "gymverse": gymverse}


def rollout_section(args: Any, model_dir: Path, server: Any, llm: type[ScriptedLLM]) -> list[dict[str, Any]]:
    """Episodes/s and ms per turn of both actors for each env and concurrency."""
    rows = []
    for env_id in envs_of(args.quick):
        for n in concurrency_of(args.quick):
            rows += rollout_case(args, make_actors(model_dir, server, env_id, n, llm), env_id, n)
    return rows


def rollout_case(args: Any, actors: dict[str, Any], env_id: str, n: int) -> list[dict[str, Any]]:
    """Interleaved rounds of both actors on `n` concurrent episodes of `env_id`."""
    import gymverse

    native, gv = actors["oat_native"], actors["gymverse"]
    ScriptedLLM.reply = reply_ids(gv.tokenizer, env_id)
    env = gymverse.make(env_id)
    seeds = [1000 + i for i in range(n)]
    prompts = [env.reset(seed=s)[0] for s in seeds]
    chat = native.tokenizer.apply_chat_template
    formatted = [chat([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True) for p in prompts]
    refs = [json.dumps({"env_id": env_id, "seed": s}) for s in seeds]
    per_sample = episodes_per_sample(args.quick)  # ten-turn GymVerse episodes; the native arm plays as many turns

    def timed(step: Callable[[], Any], reps: int) -> dict[str, float]:
        ScriptedLLM.completions = 0
        handles = []
        clock = Clock()
        for _ in range(reps):
            handles.append(step())
        wall, cpu = clock.ms(ScriptedLLM.completions)
        episodes = [len(native.ipc_client.deserialize_ipc(h)) for h in handles]  # frees the plasma objects
        return {
            "episodes_per_s": 1000 * sum(episodes) / (wall * ScriptedLLM.completions),
            "ms_per_turn": wall,
            "cpu_ms_per_turn": cpu,
        }

    arms = {
        "oat_native": lambda: timed(lambda: native.step(prompts, formatted, refs), max(1, 10 * per_sample // n)),
        "gymverse": lambda: timed(gv.step, max(1, per_sample // n)),
    }
    res = interleaved(arms, rounds_of(args), f"oat rollout {env_id} x{n}")
    gv._loop.close()
    return case_rows("oat", f"rollout {env_id} x{n}", res, "ms_per_turn", "oat_native", env=env_id, concurrency=n)


def episodes_batch(transitions: int) -> tuple[list[list[Any]], list[str]]:
    """Multi-turn episodes as the adapter's actor sends them: 4 turns each, 4 envs, prompts growing per turn."""
    import numpy as np
    from gymverse_oat.episodes import GymVerseTransition

    rng = np.random.default_rng(0)
    envs = [f"family:Env{i}" for i in range(4)]
    reply = list(range(10, 74))  # 64 reply tokens (small ids: CPython shares them, so memory stays low)
    episodes = []
    for e in range(transitions // 4):
        env_id = envs[(e // 8) % 4]
        rewards = rng.integers(0, 2, 4).astype(float)
        prompt: list[int] = list(range(1, 65))
        ep = []
        for k in range(4):
            t = GymVerseTransition(
                obs="", action="", rewards=float(rewards[k]), done=k == 3, prompt="", prompt_ids=list(prompt),
                response="", response_ids=reply, response_logprobs=[-0.1] * 64, response_is_truncated=False,
                action_is_formatted=True, info={}, env_id=env_id, episode_id=f"e{e}", turn=k,
            )  # fmt: skip
            ep.append(t)
            prompt += reply + list(range(100, 132))  # the reply and a 32-token env turn
        episodes.append(ep)
    return episodes, envs


def advantage_section(args: Any) -> list[dict[str, Any]]:
    """oat's multi-turn estimator and GRPO vs the adapter's PERPO hook, on 4k and 64k transitions."""
    import torch.distributed as dist

    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment]  # oat's strategy moves CPU tensors there
    if not dist.is_initialized():
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    rows = []
    for transitions in (4096,) if args.quick else (4096, 65536):
        rows += advantage_case(args, transitions)
    return rows


def advantage_case(args: Any, transitions: int) -> list[dict[str, Any]]:
    """Interleaved rounds of the three estimators on one batch of `transitions` turns."""
    from collections import deque

    import numpy as np
    from gymverse.rollout import EpisodeBatch
    from gymverse_oat.args import GymVerseArgs
    from gymverse_oat.episodes import record_of
    from gymverse_oat.learner import GymVerseLearner
    from oat.algorithms.ppo import PPOArgs, PPOLearner
    from oat.algorithms.ppo_multiturn import PPOMultiTurnLearner
    from oat.utils.deepspeed import DeepspeedStrategy

    episodes, envs = episodes_batch(transitions)
    common_args = {"rollout_batch_size_per_device": transitions, "gamma": 1.0}
    native = PPOMultiTurnLearner.__new__(PPOMultiTurnLearner)  # the learner's state this step uses, no model
    native.args, native.critic, native.query_step = PPOArgs(**common_args), None, 0
    native.pi_buffer, native.all_buffer = deque(maxlen=transitions), deque()
    hook = GymVerseLearner.__new__(GymVerseLearner)
    hook.args = GymVerseArgs(**common_args, env_id="|".join(envs), norm_return=True)
    hook.strategy = DeepspeedStrategy(args=hook.args)
    hook.strategy.world_size = 1
    grpo = PPOLearner.__new__(PPOLearner)
    grpo.args = PPOArgs(critic_type="grpo", num_samples=8)
    rewards = torch.tensor([[t.rewards] for ep in episodes for t in ep])

    def oat_multiturn() -> dict[str, float]:
        clock = Clock()
        native.process_feedback_data(episodes)
        wall, cpu = clock.ms()
        native.pi_buffer.clear()
        return {"ms": wall, "cpu_ms": cpu}

    def gymverse_perpo() -> dict[str, float]:
        clock = Clock()  # the records and their batch are built per step (as `process_feedback_data` does)
        hook.perpo(episodes, EpisodeBatch.of([record_of(ep) for ep in episodes]))
        wall, cpu = clock.ms()
        return {"ms": wall, "cpu_ms": cpu}

    def oat_grpo() -> dict[str, float]:
        clock = Clock()
        grpo.compute_monte_carlo_advantages(rewards, None)
        wall, cpu = clock.ms()
        return {"ms": wall, "cpu_ms": cpu}

    np.random.seed(0)  # noqa: NPY002  # oat subsamples with the global numpy RNG
    arms = {"oat_multiturn": oat_multiturn, "gymverse_perpo_hook": gymverse_perpo, "oat_grpo_single_turn": oat_grpo}
    for warm_up in arms.values():  # first calls (lazy imports, allocator growth) are not measured
        warm_up()
    res = interleaved(
        arms,
        rounds_of(args),
        f"oat advantages {transitions}",
    )
    return case_rows(
        "oat", f"advantages {transitions // 1024}k turns", res, "ms", "oat_multiturn", transitions=transitions
    )


def targets(rollout_rows: list[dict[str, Any]], adv_rows: list[dict[str, Any]]) -> list[Target]:
    """The issue's targets, judged on this run's medians."""
    note = "GymVerseLearner.perpo (records, batch, PERPO) vs PPOMultiTurnLearner.process_feedback_data, same episodes"
    return [
        *turn_targets("oat", rollout_rows, "oat_native", "oat single-turn step"),
        *adv_targets("oat", adv_rows, "x oat multi-turn estimator", note),
    ]


def main() -> None:
    import contextlib

    from conftest import build_tokenizer

    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--rollout-only", action="store_true", help="skip the advantage section")
    args = parser.parse_args()
    torch.set_num_threads(1)
    llms: dict[str, type[ScriptedLLM]] = {"scripted": ScriptedLLM}
    if args.gpu:
        if torch.cuda.is_available():
            llms["transformers_gpu"] = TransformersLLM
        else:
            progress("--gpu: no CUDA device here; the GPU section is skipped")
    assert set(REPLIES) >= set(envs_of(args.quick))
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        build_tokenizer().save_pretrained(tmp)
        server = start_plasma(stack)
        rollout_rows = rollout_section(args, Path(tmp), server, llms["scripted"])
        gpu_rows = []
        if "transformers_gpu" in llms:
            gpu_rows = rollout_section(args, Path(tmp), server, llms["transformers_gpu"])
            for r in gpu_rows:
                r["case"] = f"gpu {r['case']}"
    adv_rows = [] if args.rollout_only else advantage_section(args)
    report(
        "oat",
        "oat",
        {"rollout": rollout_rows, "gpu": gpu_rows, "advantages": adv_rows},
        ["case", "arm", "transitions", "ms", "cpu_ms", "ratio_vs_native", "wall_ratio_vs_native"],
        targets(rollout_rows, adv_rows),
        args=args,
        packages=PACKAGES,
    )


if __name__ == "__main__":
    main()
