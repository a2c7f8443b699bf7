"""OpenRLHF: GymVerse's agent executor vs OpenRLHF's MultiTurnAgentExecutor, and PERPO vs OpenRLHF's group_norm.

Run in the OpenRLHF environment (``.venv-openrlhf``, as ``.ci/run`` builds it)::

    .venv-openrlhf/bin/python benchmarks/frameworks/bench_openrlhf.py [--quick] [--gpu]

* ``openrlhf_rollout``: episodes/s and ms per turn of `gymverse_openrlhf.agent_func` (``AgentExecutor`` over
  `gymverse.rollout.run_episode`) against OpenRLHF's own ``MultiTurnAgentExecutor`` with an ``AgentInstance``
  stepping the same GymVerse env class directly (``openrlhf_native_agent.py``). Both executors are loaded from
  their files by OpenRLHF's ``_load_agent_executor`` (what ``--train.agent_func_path`` does) and run like
  ``RolloutRayActor.generate_responses`` (all samples of a batch at once, one shared ``SamplingParams``), against
  the same zero-cost engine returning vLLM's ``RequestOutput`` shape (fixed reply ids and text). vLLM itself is
  GPU-only: its module is the adapter tests' stand-in, as there.
* ``openrlhf_advantage``: OpenRLHF's ``RemoteExperienceMaker.compute_advantages_and_returns`` on real
  ``Experience`` micro-batches (built by OpenRLHF's ``_process_response_into_experience`` and
  ``split_rollout_samples``): its own ``group_norm`` (GRPO) vs the GymVerse patch (``--gymverse.norm env``:
  per-turn PERPO), at 4k and 64k transitions.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

from advantage_kit import GROUP, REPLY, run_advantage_bench, synthetic_batch
from rollout_kit import (
    ENVS,
    HORIZON,
    first_observation,
    fixture_function,
    load_test_helpers,
    run_framework,
    run_rollout_bench,
)

PACKAGES = ("openrlhf", "gymverse-adapter-openrlhf", "transformers", "torch")
HERE = Path(__file__).resolve().parent
MAX_LENGTH = 4096


class FixedEngine:
    """OpenRLHF's rollout engine with a zero-cost model: every reply is `reply_ids` (vLLM's RequestOutput shape)."""

    def __init__(self, kit: Any, tokenizer: Any, reply: str, gpu: Any = None) -> None:
        self.kit, self.gpu = kit, gpu
        self.ids = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.text = tokenizer.decode(self.ids)

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        """The fixed reply (after a real model's generation of as many tokens with ``--gpu``)."""
        if self.gpu is not None:
            await self.gpu(prompt_token_ids, len(self.ids))
        return self.kit._RequestOutput([self.kit._Completion(list(self.ids), self.text, "stop")])


class OpenRLHFRollout:
    """Both executors on one tokenizer; ``play_*`` run a batch of samples and return their turn counts."""

    def __init__(self, gpu: Any = None) -> None:
        from gymverse.curriculum.options import CurriculumOptions
        from gymverse_openrlhf.config import ENV_VAR, GymVerseConfig

        # --gymverse.max_turns, as train.py sets it
        os.environ[ENV_VAR] = GymVerseConfig(curriculum=CurriculumOptions(max_turns=HORIZON)).to_json()
        os.environ["GYMVERSE_BENCH_HORIZON"] = str(HORIZON)
        self.kit = load_test_helpers("adapter-openrlhf")  # also the vLLM / flash-attn stand-ins of the tests
        import gymverse_openrlhf.agent_func as agent_func
        from openrlhf.trainer.ray.vllm_engine import _load_agent_executor

        self.tokenizer = fixture_function(self.kit.tokenizer)(fixture_function(self.kit.corpus)())
        self.executors = {
            "gymverse": _load_agent_executor(agent_func.__file__),
            "native": _load_agent_executor(str(HERE / "openrlhf_native_agent.py")),
        }
        self.engines = {env_id: FixedEngine(self.kit, self.tokenizer, action, gpu) for env_id, action in ENVS.items()}
        self.prompts: dict[tuple[str, int], str] = {}

    def _prompt(self, env_id: str, seed: int) -> str:
        """The dataset prompt: the first observation in the chat template (``--data.apply_chat_template``)."""
        if (env_id, seed) not in self.prompts:
            messages = [{"role": "user", "content": first_observation(env_id, seed)}]
            self.prompts[(env_id, seed)] = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return self.prompts[(env_id, seed)]

    async def _play(self, arm: str, env_id: str, seeds: list[int]) -> list[int]:
        import vllm
        from gymverse.rollout.dataset import EpisodeSpec

        params = vllm.SamplingParams(max_tokens=None, skip_special_tokens=False)  # one per batch, as OpenRLHF
        outs = await asyncio.gather(
            *(
                self.executors[arm].execute(
                    prompt=self._prompt(env_id, s),
                    label=json.dumps(EpisodeSpec(env_id, seed=s, complexity=1).to_dict()),
                    sampling_params=params,
                    max_length=MAX_LENGTH,
                    hf_tokenizer=self.tokenizer,
                    llm_engine=self.engines[env_id],
                )
                for s in seeds
            )
        )
        return [len(o["action_ranges"]) for o in outs]

    async def play_gymverse(self, env_id: str, seeds: list[int]) -> list[int]:
        """GymVerse arm: `gymverse_openrlhf.agent_func.AgentExecutor`."""
        return await self._play("gymverse", env_id, seeds)

    async def play_native(self, env_id: str, seeds: list[int]) -> list[int]:
        """Native arm: OpenRLHF's ``MultiTurnAgentExecutor`` with ``openrlhf_native_agent.AgentInstance``."""
        return await self._play("native", env_id, seeds)


def bench_rollout(args: Any, rounds: int, gpu: Any = None) -> None:
    """Both arms, interleaved, per env and concurrency."""
    title = "OpenRLHF: GymVerse AgentExecutor vs MultiTurnAgentExecutor"
    run_rollout_bench(
        "openrlhf", args, rounds, OpenRLHFRollout(gpu), title=title, packages=PACKAGES, gpu=gpu is not None
    )


def advantage_arms(transitions: int) -> dict[str, Any]:
    """OpenRLHF's own ``group_norm`` and the GymVerse ``norm=env`` patch on the same Experience micro-batches."""
    load_test_helpers("adapter-openrlhf")  # the GPU-module stand-ins, before OpenRLHF's trainer modules
    import torch
    from gymverse.rollout.batch import EpisodeRecord
    from gymverse_openrlhf.advantages import make_patched
    from gymverse_openrlhf.config import GymVerseConfig
    from openrlhf.trainer.ppo_utils import experience_maker as em
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    tests = load_test_helpers("adapter-openrlhf", "test_openrlhf_advantages.py")
    b = synthetic_batch(transitions)
    prompt = list(range(5, 5 + 16))
    samples = []
    for i in range(len(b.env_ids)):
        row = b.mask[i].tolist()
        starts = [t for t in range(len(row)) if row[t] and (t == 0 or not row[t - 1])]
        response = {
            "prompt": b.uids[i],
            "label": json.dumps(
                {
                    "env_id": b.env_ids[i],
                    "seed": i // GROUP,
                    "complexity": 1,
                    "episode": EpisodeRecord(
                        b.env_ids[i],
                        tuple(b.turn_rewards[i]),
                        tuple(b.turn_ends[i]),
                        "terminated",
                        1,
                        False,
                        f"e{i}",
                        i // GROUP,
                    ).to_dict(),
                }
            ),
            "observation_tokens": prompt + [7] * len(row),
            "action_ranges": [(len(prompt) + s, len(prompt) + s + REPLY) for s in starts],
            "reward": float(sum(b.turn_rewards[i])),
            "scores": 0.0,
            "rollout_log_probs": None,
            "truncated": False,
            "extra_logs": {},
        }
        samples.append(SamplesGenerator._process_response_into_experience(None, response, max_len=MAX_LENGTH))
    args = tests.make_args("group_norm", n_samples=GROUP, micro_batch=16)
    args.data.max_len = MAX_LENGTH
    maker = tests.maker_for(args)
    original = em.RemoteExperienceMaker.compute_advantages_and_returns
    patched = make_patched(original, GymVerseConfig(norm="env"))  # what --gymverse.norm env installs

    def run(method: Any) -> dict[str, float]:
        batch = tests.experiences(maker, samples)  # OpenRLHF's micro-batching of fresh copies (not timed)
        start = time.perf_counter()
        with torch.no_grad():
            out = method(maker, batch)
        elapsed = time.perf_counter() - start
        assert sum(int(e.advantages.shape[0]) for e in out) == len(samples)
        return {"ms": 1000.0 * elapsed}

    return {"group_norm": lambda: run(original), "perpo": lambda: run(patched)}


def bench_advantage(args: Any, rounds: int) -> None:
    """OpenRLHF's advantage step: its group_norm (GRPO) vs GymVerse's per-turn PERPO patch."""
    title = "OpenRLHF: PERPO (--gymverse.norm env) vs group_norm in compute_advantages_and_returns"
    run_advantage_bench("openrlhf", args, rounds, advantage_arms, native="group_norm", title=title, packages=PACKAGES)


def main() -> None:
    """Run the OpenRLHF benchmarks."""
    run_framework("openrlhf", __doc__.splitlines()[0], bench_rollout, bench_advantage)


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # openrlhf.utils.math_utils has invalid escapes
        main()
