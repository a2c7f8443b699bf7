"""Shared fixtures for the verl adapter tests (run in the verl environment, see ``.ci/run``).

verl is imported once here, before anything from `gymverse_verl`, so the tests can check that ``import verl``
itself loaded the plugin. Everything is CPU-only; the only stand-in is the GPU generation server.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gymverse.testing import random_causal_lm, tiny_tokenizer

if importlib.util.find_spec("verl") is None:  # the main workspace env has no verl: these tests live in .venv-verl
    collect_ignore_glob = ["test_verl_*.py"]
else:
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    with warnings.catch_warnings():
        # verl warns at import about optional engines (megatron, torchtitan, ...) that a CPU box lacks
        warnings.simplefilter("ignore")
        import verl  # loads the verl.plugins entry points, i.e. gymverse_verl.plugin
        import verl.experimental.agent_loop
        import verl.trainer.ppo.v1.trainer_base  # noqa: F401
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(Path(__file__).parent))  # verl_cpu_run, verl_cpu_standins (--import-mode=importlib)

CORPUS = [
    "I am thinking of an integer between 1 and 10. You have 10 guesses. Answer with \\boxed{<integer>}.",
    "5 is too low. Higher. 8 is too high. Lower. Correct! The number was 7.",
    "You are an agent in a text environment. Read the observation and reply with your next action.",
    "\\boxed{1} \\boxed{2} \\boxed{3} \\boxed{4} \\boxed{5} \\boxed{6} \\boxed{7} \\boxed{8} \\boxed{9} \\boxed{10}",
    "Invalid action format. Turn limit reached. error failed system user assistant 0123456789",
]


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer trained here (no hub), wrapped with a ChatML template."""
    return tiny_tokenizer(CORPUS * 4, "chatml", vocab_size=400)


def family_tokenizer(family: str) -> Any:
    """The same kind of tokenizer with a real model family's special tokens and chat template."""
    return tiny_tokenizer(CORPUS * 4, family, vocab_size=400)


README = Path(__file__).resolve().parents[1] / "README.md"  # the package README


def readme_overrides() -> list[str]:
    """The Hydra overrides of the README's ``python -m verl.trainer.main_ppo`` command, exactly as written."""
    text = README.read_text()
    start = text.index("python -m verl.trainer.main_ppo")
    end = text.index("```", start)
    words = shlex.split(text[start:end].replace("\\\n", " "))
    return [os.path.expandvars(w) for w in words[3:]]


def compose(overrides: list[str]) -> Any:
    """verl's ``ppo_trainer`` config from its own Hydra defaults plus `overrides` (what ``main_ppo`` receives)."""
    import verl.trainer.main_ppo as main_ppo
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = os.path.join(os.path.dirname(main_ppo.__file__), "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def with_overrides(overrides: list[str], new: dict[str, Any]) -> list[str]:
    """`overrides` with the keys of `new` replaced (a leading ``+`` is part of the value's spelling, not the key)."""
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in {k.lstrip("+") for k in new}]
    return [*kept, *(f"{k}={v}" for k, v in new.items())]


def model_folder(family: str, path: Path) -> Path:
    """A model folder verl loads offline (``actor_rollout_ref.model.path``): `family_tokenizer` and a tiny random
    Llama over its vocabulary."""
    tok = family_tokenizer(family)
    tok.save_pretrained(path)
    random_causal_lm(tok, seed=None, max_position_embeddings=4096).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def _ray_session() -> Iterator[None]:
    """Shuts down whatever local Ray cluster the session's tests left running."""
    yield
    import ray

    ray.shutdown()


@pytest.fixture
def ray_cluster(_ray_session: None) -> None:
    """A local Ray cluster with small limits, started on first use and shared by the tests that follow (a test
    that needs its own cluster shuts this one down first: one cluster at a time)."""
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=200 * 1024**2,
            namespace="gymverse-verl-tests",
        )


def make_config(response_length: int = 256, prompt_length: int = 512, **gymverse: Any) -> Any:
    """A minimal verl config: the rollout lengths and batch sizes the agent loop reads plus a ``gymverse`` section."""
    from omegaconf import OmegaConf

    rollout = {"prompt_length": prompt_length, "response_length": response_length, "n": 2}
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"rollout": rollout},
            "data": {"apply_chat_template_kwargs": {}, "train_batch_size": 4},
            "gymverse": gymverse,
        }
    )


def make_agent_loop(config: Any, server: Any, tokenizer: Any) -> Any:
    """Build `GymVerseAgentLoop` the way verl's worker does (hydra instantiate of the registered target)."""
    import hydra
    from gymverse_verl import AGENT_NAME
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_NAME],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def row(env_id: str, seed: int, complexity: int | None = None, split: str = "train") -> dict[str, Any]:
    """A dataset row as the agent loop receives it (columns become keyword arguments), written like make-dataset's."""
    from gymverse.rollout import EpisodeSpec
    from gymverse_verl import AGENT_NAME

    return {
        "agent_name": AGENT_NAME,
        "data_source": env_id,
        "extra_info": {**EpisodeSpec(env_id, seed, complexity, split).to_dict(), "index": 0},
        "raw_prompt": [{"role": "user", "content": "GymVerse episode"}],
    }


def guess_policy(prompt: str) -> str:
    """Binary search over GuessTheNumber feedback found in the decoded prompt (the oracle, from text alone)."""
    hi = int(re.findall(r"between 1 and (\d+)", prompt)[0])
    lo = 1
    for n, word in re.findall(r"(\d+) is too (low|high)", prompt):
        if word == "low":
            lo = max(lo, int(n) + 1)
        else:
            hi = min(hi, int(n) - 1)
    return f"\\boxed{{{(lo + hi) // 2}}}"


def server_extra_fields(global_steps: int) -> dict[str, Any]:
    """The ``extra_fields`` verl's ``AsyncLLMServerManager.generate`` returns: the server's weights version
    (vLLM/SGLang servers set ``global_steps``), which the manager copies into ``min/max_global_steps``."""
    return {"global_steps": global_steps, "min_global_steps": global_steps, "max_global_steps": global_steps}


ABORT = "<abort>"  # a policy reply that makes `ScriptedServer` answer as vLLM does for an aborted request
CONTEXT_FULL = "<context full>"  # ... and as verl's vLLM server does when the prompt leaves no room to generate


def context_length_error(prompt_len: int, max_model_len: int) -> ValueError:
    """What verl 0.9.1's ``vLLMHttpServer.generate`` raises when a prompt leaves no room in the model's context
    (vllm_async_server.py; `test_standin_contract_matches_verls_vllm_server` checks the text against verl's source)."""
    return ValueError(
        f"Prompt length ({prompt_len}) leaves no room to generate within the model's maximum context length "
        f"({max_model_len}); need at least 1 token of headroom."
    )


class ScriptedServer:
    """Stand-in for verl's LLM server: replies with the tokens of a text policy, with made-up log-probs, returned
    only when the request asks for them (as vLLM does). A policy reply `ABORT` gets vLLM's aborted answer (no
    tokens, ``stop_reason="aborted"``, vllm_async_server.py:690-700); `CONTEXT_FULL` gets verl's context-length
    error (a `ValueError`; behind Ray, as a replica actor, it arrives wrapped in a ``RayTaskError``)."""

    def __init__(self, tokenizer: Any, policy: Any = guess_policy, tail: str = "<|im_end|>") -> None:
        self.tokenizer, self.policy, self.tail = tokenizer, policy, tail
        self.calls: list[dict[str, Any]] = []
        self.global_steps = 1  # the weights version; a test bumps it to simulate an update mid-episode

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.tokenizer.decode(prompt_ids)
        reply = self.policy(text)
        if reply == CONTEXT_FULL:
            self.calls.append({"request_id": request_id, "prompt": text, "ids": [], "logprobs": []})
            raise context_length_error(len(prompt_ids), len(prompt_ids))
        if reply == ABORT:
            self.calls.append({"request_id": request_id, "prompt": text, "ids": [], "logprobs": []})
            extra = {"global_steps": self.global_steps}
            return TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted", extra_fields=extra)
        ids = self.tokenizer.encode(reply + self.tail, add_special_tokens=False)
        ids = ids[: sampling_params["max_tokens"]]
        logprobs = [-0.01 * (len(self.calls) + 1) * (i + 1) for i in range(len(ids))]
        self.calls.append({"request_id": request_id, "prompt": text, "ids": ids, "logprobs": logprobs})
        return TokenOutput(
            token_ids=ids,
            log_probs=logprobs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields=server_extra_fields(self.global_steps),
        )


class TinyLlamaServer:
    """Stand-in for verl's LLM server: samples from a tiny random Llama and returns the tokens' log-probs."""

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        self.model = random_causal_lm(tokenizer, seed=seed).eval()
        self.eos = tokenizer.eos_token_id
        self.global_steps = 1
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        ids, logprobs = list(prompt_ids), []
        new: list[int] = []
        with torch.no_grad():
            for _ in range(sampling_params["max_tokens"]):
                logits = self.model(torch.tensor([ids])).logits[0, -1]
                logp = torch.log_softmax(logits.float(), dim=-1)
                tok = int(torch.multinomial(logp.exp(), 1, generator=self.gen))
                new.append(tok)
                ids.append(tok)
                logprobs.append(float(logp[tok]))
                if tok == self.eos:
                    break
        self.calls.append({"request_id": request_id, "ids": new, "logprobs": logprobs})
        return TokenOutput(
            token_ids=new,
            log_probs=logprobs,
            stop_reason="completed",
            extra_fields=server_extra_fields(self.global_steps),
        )


@pytest.fixture(scope="session")
def kit() -> Any:
    """The helpers above, for test modules (they cannot import conftest under ``--import-mode=importlib``)."""
    import types

    return types.SimpleNamespace(
        make_config=make_config,
        make_agent_loop=make_agent_loop,
        row=row,
        guess_policy=guess_policy,
        ABORT=ABORT,
        CONTEXT_FULL=CONTEXT_FULL,
        context_length_error=context_length_error,
        ScriptedServer=ScriptedServer,
        TinyLlamaServer=TinyLlamaServer,
        family_tokenizer=family_tokenizer,
        readme_overrides=readme_overrides,
        compose=compose,
        with_overrides=with_overrides,
        model_folder=model_folder,
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say why nothing here ran when verl is missing (pytest alone would only report "no tests ran", exit 5)."""
    if importlib.util.find_spec("verl") is None:
        terminalreporter.write_line(
            "packages/adapter-verl: verl is not installed in this environment, so its tests are not collected "
            "here; "
            "they run in their own environment (as .ci/run does): "
            "UV_PROJECT_ENVIRONMENT=.venv-verl uv sync --locked --package gymverse-adapter-verl "
            "--extra verl --extra test "
            "&& .venv-verl/bin/python -m pytest packages/adapter-verl/tests",
            yellow=True,
        )
