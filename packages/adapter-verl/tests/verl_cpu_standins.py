"""Stand-ins for the GPU-bound parts of a verl run, and ``PPOTrainer._setup`` with exactly those parts cut out.

* `ScriptedLLMServer` replaces a vLLM server replica: a Ray actor whose ``generate`` returns what
  ``vLLMHttpServer.generate`` returns, ``TokenOutput`` with ``extra_fields={"global_steps": <weights version>}``
  (verl's real router and ``LLMServerClient`` sit in front of it and add ``min/max_global_steps``).
* `CPUActorGroup` replaces the FSDP ``ActorRolloutRefWorker`` group: the same calls, taking and returning
  ``KVBatchMeta`` through verl's own TransferQueue bridge (``tqbridge``), on a tiny Llama on CPU whose update is
  verl's clipped PPO loss and a real optimizer step.
* `FakeTransferQueue` stands in for the TransferQueue client in the tests that run verl's advantage step without
  a cluster: rows are stored and read back with verl's own ``list_of_dict_to_tensordict``.
* `make_cpu_setup` is ``PPOTrainer._setup`` minus ``ResourcePoolManager.create_resource_pool`` (GPU bundles),
  the FSDP worker group and ``LLMServerManager.create`` (vLLM replicas); the rest is verl's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


class FakeTransferQueue:
    """In-memory stand-in for the TransferQueue client (a distributed store, not GPU-bound, but needs a cluster)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> Any:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        present = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in present} for k in keys])

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: Any, tags: Any = None) -> Any:
        from transfer_queue import KVBatchMeta

        for i, k in enumerate(keys):
            row = self.rows.setdefault(k, {})
            for name in fields.keys():  # noqa: SIM118  # a TensorDict iterates over rows, not keys
                row[name] = fields[name][i]
        return KVBatchMeta(partition_id=partition_id, keys=list(keys), tags=tags or [{} for _ in keys])

    async def async_kv_batch_put(self, keys: list[str], partition_id: str, fields: Any, tags: Any = None) -> Any:
        return self.kv_batch_put(keys, partition_id, fields, tags)


class MarkerActorGroup:
    """Stand-in for the FSDP actor worker group's checkpoint calls only (GPU-only): writes/reads a marker file."""

    def __init__(self) -> None:
        self.loaded: list[str] = []

    def save_checkpoint(self, local_path: str, remote_path: Any, global_step: int, max_ckpt_to_keep: Any) -> None:
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "weights.txt"), "w") as f:
            f.write(str(global_step))

    def load_checkpoint(self, local_path: str, del_local_after_load: bool = False) -> None:
        with open(os.path.join(local_path, "weights.txt")) as f:
            self.loaded.append(f.read())


class ScriptedLLMServer:
    """Stand-in for a vLLM server replica (GPU): the conftest's scripted policy behind ``generate``, returning
    ``TokenOutput`` with ``extra_fields={"global_steps": <weights version>}`` exactly as ``vLLMHttpServer`` does
    (set by ``set_global_steps`` when the trainer syncs weights)."""

    def __init__(self, model_path: str, scripted_server_cls: Any, policy: Any) -> None:
        from transformers import AutoTokenizer

        self.inner = scripted_server_cls(AutoTokenizer.from_pretrained(model_path), policy=policy)
        self.global_steps: int | None = None

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any) -> Any:
        out = await self.inner.generate(request_id, prompt_ids=prompt_ids, sampling_params=dict(sampling_params))
        out.extra_fields = {"global_steps": self.global_steps}
        return out

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    def calls(self) -> list[dict[str, Any]]:
        return [{"prompt": c["prompt"], "ids": c["ids"]} for c in self.inner.calls]


class CPUActorGroup:
    """Stand-in for the FSDP ``ActorRolloutRefWorker`` group (GPU-only): the calls verl's trainer makes on it, taking
    and returning `KVBatchMeta` through verl's own TransferQueue bridge (``tqbridge``), on a tiny Llama on CPU.
    ``compute_log_prob`` returns nested per-position log-probs and entropy over prompt + response (what the engine
    returns); ``update_actor`` runs verl's clipped PPO loss and one AdamW step per mini-batch."""

    world_size = 1

    def __init__(self, config: Any, server: Any) -> None:
        import torch
        from transformers import AutoModelForCausalLM
        from verl.utils.config import omega_conf_to_dataclass

        torch.manual_seed(0)
        self.model = AutoModelForCausalLM.from_pretrained(config.actor_rollout_ref.model.path)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
        self.server = server
        self._dispatch_info: dict[str, list[int]] = {}
        self.saved: list[int] = []
        self.loaded: list[int] = []
        self.updates = 0
        from verl.utils.transferqueue_utils import tqbridge

        self.compute_log_prob = tqbridge()(self._compute_log_prob)
        self.update_actor = tqbridge()(self._update_actor)

    def _query_dispatch_info(self, mesh_name: str) -> list[int]:
        return [0]  # one data-parallel rank

    def _token_stats(self, ids: Any, temperature: float) -> tuple[Any, Any]:
        """log p(x_{t+1} | x_<=t) and the entropy at every position (0 at the last), like the engine's output."""
        import torch

        logits = self.model(ids[None]).logits[0].float() / temperature
        logp = torch.log_softmax(logits, dim=-1)
        nxt = torch.zeros_like(ids)
        nxt[:-1] = ids[1:]
        lp = logp.gather(-1, nxt[:, None])[:, 0]
        ent = -(logp.exp() * logp).sum(-1)
        lp[-1] = ent[-1] = 0.0
        return lp, ent

    def _compute_log_prob(self, data: Any) -> Any:
        import torch
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu

        temperature = float(tu.get(data, "temperature", default=1.0))
        lps, ents = [], []
        with torch.no_grad():
            for ids in data["input_ids"].unbind():
                lp, ent = self._token_stats(ids, temperature)
                lps.append(lp)
                ents.append(ent)
        nested = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
        return TensorDict({"log_probs": nested(lps), "entropy": nested(ents)}, batch_size=len(lps))

    def _update_actor(self, data: Any) -> Any:
        import torch
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        from verl.utils import tensordict_utils as tu

        temperature = float(tu.get(data, "temperature", default=1.0))
        size = int(tu.get(data, "mini_batch_size"))
        rows = list(range(len(data)))
        loss_fn = get_policy_loss_fn(self.actor_config.policy_loss.loss_mode)
        pad = lambda xs: torch.nn.utils.rnn.pad_sequence(list(xs), batch_first=True)  # noqa: E731
        metrics: dict[str, list[float]] = {"loss": [], "pg_loss": [], "pg_clipfrac": [], "grad_norm": []}
        ids, prompts = data["input_ids"].unbind(), data["prompts"].unbind()
        old, adv, mask = (data[k].unbind() for k in ("old_log_probs", "advantages", "response_mask"))
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            new = []
            for i in batch:
                lp, _ = self._token_stats(ids[i], temperature)
                p, r = len(prompts[i]), len(mask[i])
                new.append(lp[p - 1 : p - 1 + r])  # position t holds log p(x_{t+1})
            pg_loss, pg_metrics = loss_fn(
                old_log_prob=pad(old[i] for i in batch),
                log_prob=pad(new),
                advantages=pad(adv[i] for i in batch),
                response_mask=pad(mask[i] for i in batch).float(),
                loss_agg_mode=self.actor_config.loss_agg_mode,
                config=self.actor_config,
            )
            self.optim.zero_grad()
            pg_loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optim.step()
            self.updates += 1
            metrics["loss"].append(float(pg_loss))
            metrics["pg_loss"].append(float(pg_loss))
            metrics["pg_clipfrac"].append(float(pg_metrics.get("actor/pg_clipfrac", 0.0)))
            metrics["grad_norm"].append(float(grad_norm))
        return tu.get_tensordict(tensor_dict={}, non_tensor_dict={"metrics": {**metrics, "mfu": 0.0}})

    def update_weights(self, global_steps: int | None = None, mode: str = "naive") -> Any:
        """The colocated weight sync: the server now serves weights version `global_steps` (vllm_rollout.py:250)."""
        return self.server.set_global_steps.remote(global_steps)

    def save_checkpoint(
        self, local_path: str, hdfs_path: Any = None, global_step: int = 0, max_ckpt_to_keep: Any = None
    ) -> None:
        import torch

        os.makedirs(local_path, exist_ok=True)
        state = {"model": self.model.state_dict(), "optim": self.optim.state_dict(), "step": global_step}
        torch.save(state, os.path.join(local_path, "model.pt"))
        self.saved.append(global_step)

    def load_checkpoint(self, local_path: str, hdfs_path: Any = None, del_local_after_load: bool = False) -> None:
        import torch

        state = torch.load(os.path.join(local_path, "model.pt"), weights_only=False)
        self.model.load_state_dict(state["model"])
        self.optim.load_state_dict(state["optim"])
        self.loaded.append(int(state["step"]))


class ScriptedServerManager:
    """Stand-in for ``LLMServerManager`` (which launches vLLM replicas on GPUs): verl's own router and
    ``LLMServerClient`` in front of one `ScriptedLLMServer`, no replicas to sleep or wake."""

    def __init__(self, config: Any, server: Any) -> None:
        from verl.workers.rollout.router import get_router_handle

        self.config = config
        self.balancer = get_router_handle(servers={"scripted-0": server})

    def get_client(self) -> Any:
        from verl.workers.rollout.llm_server import LLMServerClient

        return LLMServerClient(config=self.config, load_balancer_handle=self.balancer)

    def get_replicas(self) -> list[Any]:
        return []


def make_cpu_setup(server: Any, groups: list[CPUActorGroup]) -> Callable[[Any], None]:
    """``PPOTrainer._setup`` with its GPU steps cut out (each cut named below); everything else is verl's own."""

    def cpu_setup(self: Any) -> None:
        from verl.checkpoint_engine import CheckpointEngineManager
        from verl.experimental.reward_loop import RewardLoopManager
        from verl.trainer.ppo.utils import Role
        from verl.utils.config import omega_conf_to_dataclass

        self._init_tokenizer()
        self._init_dataloader()
        self._init_dump_executor()
        self._init_resource_pool_mgr()
        # cut: resource_pool_manager.create_resource_pool() places GPU bundles (_check_resource_available)
        assert Role.ActorRollout in self.role_worker_mapping and not self.use_critic
        self.ref_in_actor = False
        # cut: RayWorkerGroup(ActorRolloutRefWorker).init_model() builds the FSDP engine on GPUs
        self.actor_rollout_wg = CPUActorGroup(self.config, server)
        groups.append(self.actor_rollout_wg)
        self.reward_loop_manager = RewardLoopManager(config=self.config, rm_resource_pool=None)
        self.teacher_model_manager = self.distillation_config = None
        # cut: LLMServerManager.create launches vLLM/SGLang replicas on the actor's GPUs
        self.llm_server_manager = ScriptedServerManager(self.config, server)
        engine_config = omega_conf_to_dataclass(self.config.actor_rollout_ref.rollout.checkpoint_engine)
        engine_config.backend = "naive"
        self.checkpoint_manager = CheckpointEngineManager(
            config=engine_config, actor_wg=self.actor_rollout_wg, replicas=self.llm_server_manager.get_replicas()
        )
        self.checkpoint_manager.sleep_replicas()
        self._load_checkpoint()

    return cpu_setup
