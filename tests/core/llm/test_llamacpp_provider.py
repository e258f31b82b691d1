"""The embedded SmolLM2 run by llama.cpp, for real: the packaged GGUF, a few tokens on the CPU."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from core.llm import ChatMessage, GenerationOptions, LLMError
from core.llm.llamacpp import (
    LANGUAGE_INSTRUCTIONS,
    LlamaCppProvider,
    NoRepeatNGram,
    cut_at_sentence,
    with_language_instruction,
)

PT_PROMPT = [
    ChatMessage("system", "Você é AKIRA, uma assistente simpática."),
    ChatMessage("user", "Oi! Qual é a capital do Brasil?"),
]


@pytest.fixture
async def llm() -> AsyncIterator[LlamaCppProvider]:
    provider = LlamaCppProvider(threads=1, seed=7, temperature=0)
    await provider.start()
    yield provider
    await provider.close()


async def test_generates_and_streams_from_the_packaged_gguf(llm: LlamaCppProvider) -> None:
    assert llm.loaded and llm.load_count == 1
    assert llm.loaded_from is not None and llm.loaded_from.endswith(".gguf")
    options = GenerationOptions(max_tokens=12, temperature=0, language="pt")
    result = await llm.generate(PT_PROMPT, options)
    assert result.text.strip()
    assert 1 <= result.usage["completion_tokens"] <= 12
    assert result.usage["prompt_tokens"] > 10
    assert result.model == "SmolLM2-135M-Instruct"
    pieces = [piece async for piece in llm.stream(PT_PROMPT, options)]
    assert len(pieces) > 1
    # Greedy decoding: the stream is the same reply, token by token (before the cut at
    # the last whole sentence that a reply out of tokens gets).
    assert "".join(pieces).strip().startswith(result.text)
    await llm.start()  # started once only
    assert llm.load_count == 1


async def test_cancel_and_time_limit_stop_at_the_next_token(llm: LlamaCppProvider) -> None:
    long_job = asyncio.create_task(llm.generate(PT_PROMPT, GenerationOptions(max_tokens=2000)))
    await asyncio.sleep(0.3)
    long_job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long_job
    # The worker is free again (the cancelled generation did not run to 2000 tokens).
    after = await asyncio.wait_for(
        llm.generate(PT_PROMPT, GenerationOptions(max_tokens=4, temperature=0)), 60
    )
    assert after.usage["completion_tokens"] <= 4

    hurried = LlamaCppProvider(threads=1, timeout_s=0.05)
    try:
        cut = await asyncio.wait_for(
            hurried.generate(PT_PROMPT, GenerationOptions(max_tokens=2000)), 60
        )
    finally:
        await hurried.close()
    assert cut.usage["completion_tokens"] < 2000


async def test_a_long_history_is_cut_to_the_context(llm: LlamaCppProvider) -> None:
    small = LlamaCppProvider(threads=1, context_tokens=256, temperature=0)
    history = [
        ChatMessage("user" if i % 2 == 0 else "assistant", f"mensagem número {i} " * 20)
        for i in range(30)
    ]
    try:
        result = await small.generate(
            [PT_PROMPT[0], *history, PT_PROMPT[1]], GenerationOptions(max_tokens=8)
        )
    finally:
        await small.close()
    assert result.usage["prompt_tokens"] <= 256 - 8


def test_no_repeat_ngram_bans_the_token_that_would_repeat_a_4gram() -> None:
    processor = NoRepeatNGram(4, prompt_tokens=3)
    prompt = [9, 9, 9]
    scores = np.zeros(20, dtype=np.float32)
    processor(np.array(prompt), scores.copy())  # the first call marks where the reply starts
    reply = [1, 2, 3, 4, 5, 1, 2, 3]  # "1 2 3" again: 4 would repeat "1 2 3 4"
    out = processor(np.array(prompt + reply), scores.copy())
    assert out[4] == -np.inf
    assert np.isfinite(np.delete(out, 4)).all()
    # The prompt's own n-grams may be echoed once.
    fresh = NoRepeatNGram(4, prompt_tokens=4)
    fresh(np.array([1, 2, 3, 4]), scores.copy())
    assert np.isfinite(fresh(np.array([1, 2, 3, 4, 1, 2, 3]), scores.copy())).all()


def test_replies_out_of_tokens_end_at_their_last_sentence() -> None:
    assert cut_at_sentence("Oi, Carla! Tudo ótimo por aqui. E você, como") == (
        "Oi, Carla! Tudo ótimo por aqui."
    )
    assert cut_at_sentence("sem ponto nenhum") == "sem ponto nenhum"
    assert cut_at_sentence("Versão 2.5 saiu. Agora") == "Versão 2.5 saiu."


def test_the_language_instruction_ends_the_system_message() -> None:
    chat = with_language_instruction(PT_PROMPT, "pt")
    assert chat[0].content.endswith(LANGUAGE_INSTRUCTIONS["pt"])
    assert chat[1:] == PT_PROMPT[1:]
    assert with_language_instruction(PT_PROMPT, None) == PT_PROMPT
    bare = with_language_instruction([ChatMessage("user", "hi")], "en")
    assert bare[0] == ChatMessage("system", LANGUAGE_INSTRUCTIONS["en"])


async def test_missing_llama_cpp_gives_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    llm = LlamaCppProvider()
    with pytest.raises(LLMError, match=r"llama-cpp-python.*pip install"):
        await llm.start()
    await llm.close()


async def test_a_directory_is_not_for_llama_cpp(tmp_path: Path) -> None:
    llm = LlamaCppProvider(str(tmp_path))
    with pytest.raises(LLMError, match="LOCAL_BACKEND=transformers"):
        await llm.start()
    await llm.close()
    closed = LlamaCppProvider()
    await closed.close()
    with pytest.raises(LLMError, match="closed"):
        await closed.generate(PT_PROMPT)
