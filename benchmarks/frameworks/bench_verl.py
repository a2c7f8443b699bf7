"""verl: GymVerse's agent loop vs verl's own ToolAgentLoop, and PERPO vs verl's GRPO in verl's advantage step.

Run in the verl environment (``.venv-verl``, as ``.ci/run`` builds it)::

    .venv-verl/bin/python benchmarks/frameworks/bench_verl.py [--quick] [--gpu]

* ``verl_rollout``: episodes/s and ms per turn of `gymverse_verl.agent_loop.GymVerseAgentLoop` against verl's
  ``ToolAgentLoop`` (``tool_agent``, hermes tool calls) whose one tool steps the same GymVerse env class directly
  (a verl ``BaseTool`` keeping the env on verl's per-trajectory ``AgentData``). Both loops are built per episode
  with ``hydra.utils.instantiate`` from verl's agent-loop registry, as verl's ``AgentLoopWorker`` does, and talk
  to the same zero-cost server returning verl's ``TokenOutput`` (fixed reply ids, ``extra_fields`` as the server
  manager sets them). The tokenizer has the real Qwen3 chat template (tools, ``tool`` role, thinking).
* ``verl_advantage``: verl's v1 advantage step (``compute_advantage_for_multi_trajectories``, what
  ``PPOTrainer._compute_advantage`` calls) on a real ``DataProto``: ``grpo`` vs ``gymverse_perpo`` (the adapter's
  ``episode_rows`` + ``episode_batch`` hook around it, as `GymVersePPOTrainer` runs it), at 4k and 64k transitions.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # verl warns at import about engines a CPU box lacks (megatron, ...)
    import verl  # loads the verl.plugins entry points: GymVerse's agent loop, estimator, trainer
    import verl.experimental.agent_loop  # noqa: F401

import asyncio

from advantage_kit import run_advantage_bench, synthetic_batch
from rollout_kit import (
    ENVS,
    HORIZON,
    first_observation,
    load_test_helpers,
    run_framework,
    run_rollout_bench,
)

PACKAGES = ("verl", "gymverse-adapter-verl", "transformers", "torch")
TOOL = "act"


class FixedServer:
    """verl's server manager with a zero-cost model: every reply is `reply_ids` (``TokenOutput``, as verl returns)."""

    def __init__(self, reply_ids: list[int], extra_fields: dict[str, Any], gpu: Any = None) -> None:
        self.reply_ids, self.extra_fields, self.gpu = reply_ids, extra_fields, gpu
        self.logprobs = [-0.5] * len(reply_ids)

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any) -> Any:
        """The fixed reply (after a real model's generation of as many tokens with ``--gpu``)."""
        from verl.workers.rollout.replica import TokenOutput

        if self.gpu is not None:
            await self.gpu(prompt_ids, len(self.reply_ids))
        return TokenOutput(
            token_ids=list(self.reply_ids),
            log_probs=list(self.logprobs),
            stop_reason="completed",
            extra_fields=dict(self.extra_fields),
        )


def env_tool() -> Any:
    """verl's native route to an env: a ``BaseTool`` stepping the GymVerse env kept on the trajectory's AgentData."""
    import gymverse
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    class EnvTool(BaseTool):
        async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
            data = kwargs["agent_data"]
            env = getattr(data, "gymverse_env", None)
            if env is None:  # first call of the trajectory: build and reset the env from the row's tools_kwargs
                spec = data.tools_kwargs[TOOL]["create_kwargs"]
                env = data.gymverse_env = gymverse.make(spec["env_id"], complexity=spec["complexity"])
                env.reset(seed=spec["seed"])
            obs, reward, *_ = env.step(str(parameters.get("action", "")))
            data.gymverse_steps = getattr(data, "gymverse_steps", 0) + 1
            return ToolResponse(text=obs), float(reward), {}

    schema = OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {
                "name": TOOL,
                "description": "Send one action to the environment.",
                "parameters": {
                    "type": "object",
                    "properties": {"action": {"type": "string", "description": "the action text"}},
                    "required": ["action"],
                },
            },
        }
    )
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):  # BaseTool prints its schema
        return EnvTool(config={}, tool_schema=schema)


class VerlRollout:
    """Both arms on one tokenizer and config; ``play_*`` run a batch of episodes and return their turn counts."""

    def __init__(self, gpu: Any = None) -> None:
        from gymverse_verl import AGENT_NAME
        from gymverse_verl.settings import DEFAULT_SYSTEM_PROMPT

        self.kit = load_test_helpers("adapter-verl")
        self.tokenizer = self.kit.family_tokenizer("qwen3")
        self.config = self.kit.make_config(response_length=8192, prompt_length=4096, max_turns=HORIZON)
        rollout = self.config.actor_rollout_ref.rollout
        rollout.full_determinism = False
        # H tool calls: the (H+1)-th reply ends the loop (verl checks max_user_turns after generating)
        rollout.multi_turn = {
            "max_user_turns": HORIZON,
            "max_assistant_turns": HORIZON + 1,
            "max_parallel_calls": 1,
            "max_tool_response_length": 8192,
            "tool_response_truncate_side": "right",
            "format": "hermes",
        }
        self.agent_name, self.system = AGENT_NAME, DEFAULT_SYSTEM_PROMPT
        self.tool = env_tool()
        fields = self.kit.server_extra_fields(1)
        tok = self.tokenizer
        eos = tok.eos_token
        self.servers = {
            env_id: {
                "gymverse": FixedServer(tok.encode(action + eos, add_special_tokens=False), fields, gpu),
                "native": FixedServer(tok.encode(tool_call(action) + eos, add_special_tokens=False), fields, gpu),
            }
            for env_id, action in ENVS.items()
        }
        self.prompts: dict[tuple[str, int], str] = {}

    def _loop(self, name: str, server: Any, tools: list[Any]) -> Any:
        """An agent loop built as verl's AgentLoopWorker._run_agent_loop builds it."""
        import hydra
        from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
        from verl.utils.dataset.rl_dataset import RLHFDataset

        return hydra.utils.instantiate(
            config=_agent_loop_registry[name],
            trainer_config=DictConfigWrap(config=self.config),
            server_manager=server,
            tokenizer=self.tokenizer,
            processor=None,
            hf_model_type="qwen3",  # the Continuous Token builder verl picks for a Qwen3 model
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(self.config.data),
            tools=ToolListWrap(tools),
        )

    def native_row(self, env_id: str, seed: int) -> dict[str, Any]:
        """A verl dataset row for the tool agent: the env's first observation as the prompt (prepared offline)."""
        key = (env_id, seed)
        if key not in self.prompts:
            self.prompts[key] = first_observation(env_id, seed)
        return {
            "agent_name": "tool_agent",
            "raw_prompt": [{"role": "system", "content": self.system}, {"role": "user", "content": self.prompts[key]}],
            "tools_kwargs": {TOOL: {"create_kwargs": {"env_id": env_id, "seed": seed, "complexity": 1}}},
            "extra_info": {"env_id": env_id, "seed": seed},
        }

    async def play_gymverse(self, env_id: str, seeds: list[int]) -> list[int]:
        """GymVerse arm: one `GymVerseAgentLoop` per episode, all concurrent."""
        from gymverse_verl import EXTRA_KEY

        server = self.servers[env_id]["gymverse"]
        outs = await asyncio.gather(
            *(self._loop(self.agent_name, server, []).run({}, **self.kit.row(env_id, s, 1)) for s in seeds)
        )
        return [len(o.extra_fields[EXTRA_KEY]["turn_rewards"]) for o in outs]  # the episode's `EpisodeRecord`

    async def play_native(self, env_id: str, seeds: list[int]) -> list[int]:
        """Native arm: one verl ``ToolAgentLoop`` per episode, all concurrent."""
        server = self.servers[env_id]["native"]
        outs = await asyncio.gather(
            *(self._loop("tool_agent", server, [self.tool]).run({}, **self.native_row(env_id, s)) for s in seeds)
        )
        return [int(o.num_turns - 1) // 2 for o in outs]  # user + assistant turns + 1; one tool call per user turn


def tool_call(action: str) -> str:
    """A hermes tool call of the env tool, as Qwen3 writes it."""
    import json

    return "<tool_call>\n" + json.dumps({"name": TOOL, "arguments": {"action": action}}) + "\n</tool_call>"


def bench_rollout(args: Any, rounds: int, gpu: Any = None) -> None:
    """Both arms, interleaved, per env and concurrency."""
    title = "verl: GymVerseAgentLoop vs verl ToolAgentLoop"
    run_rollout_bench("verl", args, rounds, VerlRollout(gpu), title=title, packages=PACKAGES, gpu=gpu is not None)


def advantage_arms(transitions: int) -> dict[str, Any]:
    """The two timed arms on one synthetic batch: verl's ``grpo`` and ``gymverse_perpo`` with the trainer's hook."""
    import numpy as np
    from gymverse.rollout import EpisodeRecord
    from gymverse_verl import ADV_ESTIMATOR, EXTRA_KEY
    from gymverse_verl.advantage import Rows, episode_rows
    from verl import DataProto
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    b = synthetic_batch(transitions)
    uids = np.array(b.uids, dtype=object)
    extra = np.empty(len(b.uids), dtype=object)
    extra[:] = [  # what the agent loop stores per trajectory: its `EpisodeRecord`
        {EXTRA_KEY: EpisodeRecord(e, tuple(r), tuple(t)).to_dict()}
        for e, r, t in zip(b.env_ids, b.turn_rewards, b.turn_ends)
    ]
    keys = [f"{u}_{i}_0" for i, u in enumerate(b.uids)]  # verl's {uid}_{session}_{index} TransferQueue keys
    config = AlgoConfig(gamma=1.0)

    def run(estimator: str) -> dict[str, float]:
        data = DataProto.from_dict(
            tensors={"token_level_rewards": b.scores.clone(), "response_mask": b.mask.clone()},
            non_tensors={"uid": uids.copy(), "extra_fields": extra},
        )
        kwargs = {"batch_keys": keys, "num_repeat": b.group, "config": config}
        start = time.perf_counter()
        if estimator == "grpo":
            out = compute_advantage_for_multi_trajectories(data, adv_estimator="grpo", **kwargs)
        else:  # what GymVersePPOTrainer._compute_advantage wraps around verl's own step
            nt = data.non_tensor_batch
            with episode_rows(Rows.read(nt["uid"], nt["extra_fields"], 1e-6)):
                out = compute_advantage_for_multi_trajectories(data, adv_estimator=ADV_ESTIMATOR, **kwargs)
        elapsed = time.perf_counter() - start
        assert out.batch["advantages"].shape == b.mask.shape
        return {"ms": 1000.0 * elapsed}

    return {"grpo": lambda: run("grpo"), "perpo": lambda: run("perpo")}


def bench_advantage(args: Any, rounds: int) -> None:
    """verl's v1 advantage step: GRPO vs the GymVerse PERPO estimator with the trainer's hook."""
    title = "verl: PERPO (gymverse_perpo + trainer hook) vs GRPO in compute_advantage_for_multi_trajectories"
    run_advantage_bench("verl", args, rounds, advantage_arms, native="grpo", title=title, packages=PACKAGES)


def main() -> None:
    """Run the verl benchmarks."""
    run_framework("verl", __doc__.splitlines()[0], bench_rollout, bench_advantage)


if __name__ == "__main__":
    main()
