"""Shared fixtures for the OpenRLHF adapter tests (run in the `.venv-openrlhf` environment, see `.ci/run`).

Stand-ins exist only for the GPU-only modules OpenRLHF imports (``gpu_stand_ins/``, put on ``sys.path`` here):
`vllm` (SamplingParams, a scripted AsyncLLMEngine, `vllm.inputs.TokensPrompt`, `vllm.utils.random_uuid`) and the
compiled `flash_attn_2_cuda` extension. Everything else is the real openrlhf 0.11.2, transformers and tokenizers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import pytest

if importlib.util.find_spec("openrlhf") is None:  # the workspace's main environment has no OpenRLHF
    collect_ignore_glob = ["test_openrlhf_*.py"]


STAND_INS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_stand_ins")


def _install_gpu_stand_ins() -> None:
    if STAND_INS not in sys.path:
        sys.path.insert(0, STAND_INS)


if "collect_ignore_glob" not in globals():
    _install_gpu_stand_ins()
    with warnings.catch_warnings():
        # Third-party import-time warnings, not ours to fix: torch.cuda warns about the pynvml package OpenRLHF
        # pulls in, and openrlhf.utils.math_utils has invalid escape sequences (a SyntaxWarning when compiled).
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import openrlhf.trainer.ppo_utils.experience_maker
        import openrlhf.trainer.ppo_utils.samples_generator
        import openrlhf.utils.agent  # noqa: F401


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    """GymVerse observations and boxed actions: what the test tokenizers are trained on."""
    import gymverse

    texts = []
    for env_id in ("game:GuessTheNumber", "logic:Nonogram"):
        env = gymverse.make(env_id)
        for seed in range(4):
            texts.append(env.reset(seed=seed)[0])
            texts.append(env.solve())
    return texts + [rf"\boxed{{{i}}} Too low. Too high. Correct!" for i in range(20)]


@pytest.fixture(scope="session")
def tokenizer(corpus: list[str]) -> Any:
    """A tiny ChatML tokenizer trained on `corpus` (`gymverse.testing.tiny_tokenizer`, no hub access)."""
    from gymverse.testing import tiny_tokenizer

    return tiny_tokenizer(corpus, "chatml", vocab_size=600)


@dataclass
class _Completion:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: Any = None


@dataclass
class _RequestOutput:
    outputs: list[_Completion]


class ScriptedEngine:
    """Stand-in for OpenRLHF's rollout engine: answers each `generate` call with the next scripted action.

    Each action is tokenized and closed with the EOS token, cut to ``sampling_params.max_tokens`` like vLLM
    (``finish_reason="length"`` then), with log-probs only when ``sampling_params.logprobs`` is set (as vLLM). It
    records every prompt it was asked to continue.
    """

    def __init__(self, tokenizer: Any, actions: list[str]) -> None:
        self.tokenizer = tokenizer
        self.actions = list(actions)
        self.prompts: list[list[int]] = []
        self.returned: list[list[int]] = []

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        """Next action as token ids (vLLM's RequestOutput shape)."""
        self.prompts.append(list(prompt_token_ids))
        if not self.actions:
            raise AssertionError("the agent asked for more actions than the test scripted")
        text = self.actions.pop(0)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        reason = "stop"
        limit = sampling_params.max_tokens
        if limit is not None and len(ids) > limit:
            ids, reason = ids[:limit], "length"
        self.returned.append(ids)
        logprobs = None
        if sampling_params.logprobs is not None:
            from vllm import Logprob

            logprobs = [{t: Logprob(-0.5)} for t in ids]
        return _RequestOutput([_Completion(ids, self.tokenizer.decode(ids), reason, logprobs)])


@pytest.fixture
def engine_cls() -> type[ScriptedEngine]:
    """The scripted stand-in engine class."""
    return ScriptedEngine


@pytest.fixture
def sampling_params() -> Any:
    """vLLM-style sampling params as OpenRLHF builds them (stand-in class; dynamic max_tokens)."""
    import vllm

    return vllm.SamplingParams(max_tokens=None, skip_special_tokens=False)


def rollout_actor(model_dir: str, max_model_len: int) -> Any:
    """OpenRLHF's real `RolloutRayActor` (its Ray-free class, ``__init__`` skipped: no GPU placement to set up)
    around the vLLM stand-in's `AsyncLLMEngine` for the tokenizer saved in `model_dir`."""
    import vllm
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor

    actor = object.__new__(RolloutRayActor.__ray_metadata__.modified_class)
    actor.llm = vllm.AsyncLLMEngine(vllm.AsyncEngineArgs(model=model_dir, max_model_len=max_model_len))
    actor._mm_pad_token_ids = None
    return actor


@pytest.fixture
def model_dir(tokenizer: Any, tmp_path: Any) -> str:
    """The test tokenizer saved where the vLLM stand-in loads it from (its ``model`` path)."""
    tokenizer.save_pretrained(tmp_path / "model")
    return str(tmp_path / "model")


@pytest.fixture
def rollout(model_dir: str) -> Any:
    """``rollout(max_model_len)``: a `rollout_actor` on the test tokenizer."""
    return lambda max_model_len=4096: rollout_actor(model_dir, max_model_len)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say why nothing here ran when openrlhf is missing (pytest alone would only report "no tests ran", exit 5)."""
    if importlib.util.find_spec("openrlhf") is None:
        terminalreporter.write_line(
            "packages/adapter-openrlhf: openrlhf is not installed in this environment, so its tests are not collected "
            "here; "
            "they run in their own environment (as .ci/run does): "
            'UV_PROJECT_ENVIRONMENT="$PWD/.venv-openrlhf" uv sync --locked --project packages/adapter-openrlhf '
            "--extra openrlhf --group test "
            "&& .venv-openrlhf/bin/python -m pytest packages/adapter-openrlhf/tests",
            yellow=True,
        )
