"""The LLM as a judge of emotion, against the fake OpenAI-compatible server: its answers
parsed, its failures (time-out, garbage, errors, a dead server) falling back to the
classifier, and in the pipeline its request running while recall does."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from akira_bot.app import build_engine
from akira_bot.features.emotion import build_detector_from_settings
from akira_bot.settings import Settings
from core.emotion import EmotionalState, LexiconDetector
from core.emotion.detector import EmotionReading
from core.emotion.llm_judge import LLMDetector, LLMJudge, parse_judgement
from core.llm.openai import OpenAICompatibleProvider
from core.pipeline import CallNext, TurnContext
from core.stages.emotion import PENDING_KEY, EmotionJudgeStage, EmotionStage
from tests.conftest import ask, make_message
from tests.fakes.openai_server import FakeOpenAI, Hang, Malformed, Reply, Status

HOSTILE = "você é inútil! essa resposta é ridícula"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"label": "triste", "confidence": 0.82}', EmotionReading("triste", 0.82)),
        ('```json\n{"label": "Feliz", "confidence": "90%"}\n```', EmotionReading("feliz", 0.9)),
        (
            '<think>hmm, angry?</think>{"label": "angry", "confidence": 75}',
            EmotionReading("agressivo", 0.75),
        ),
        ("neutro", EmotionReading("neutro", 0.6)),
        ('{"label": "confuso"}', EmotionReading("confuso", 0.6)),
    ],
)
def test_answers_that_are_a_label_and_a_confidence(answer: str, expected: EmotionReading) -> None:
    assert parse_judgement(answer) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "I think the user is quite upset, maybe agressivo or triste.",
        '{"label": "furioso", "confidence": 0.9}',
        '{"label": "triste", "confidence": 7.5e3}',
        '{"label": "triste", "confidence": true}',
        '{"label": ["triste"], "confidence": 0.5}',
        "<think>agressivo</think>",
        "agressivo triste",
    ],
)
def test_anything_else_is_no_judgement(answer: str) -> None:
    assert parse_judgement(answer) is None


def provider_for(fake: FakeOpenAI, **kwargs: Any) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(
        base_url=fake.url, model="fake-model", max_retries=0, timeout_s=5.0, **kwargs
    )


async def test_the_judge_sends_the_five_labels_and_reads_the_answer() -> None:
    async with FakeOpenAI() as fake:
        fake.queue(Reply('{"label": "triste", "confidence": 0.8}'))
        provider = provider_for(fake)
        try:
            reading = await LLMJudge(provider).judge("perdi meu cachorro hoje")
        finally:
            await provider.close()
        assert reading == EmotionReading("triste", 0.8)
        (request,) = fake.completion_requests
        system, user = request.messages
        assert all(
            label in system["content"]
            for label in ("agressivo", "feliz", "triste", "confuso", "neutro")
        )
        assert "confidence" in system["content"]
        assert "perdi meu cachorro hoje" in user["content"]
        assert request.json.get("temperature") == 0.0


@pytest.mark.parametrize(
    "behaviour",
    [
        Reply("Hmm, hard to say. The person may be sad, or just tired."),
        Malformed(),
        Status(500),
        Status(401, "bad key"),
        Hang(seconds=10.0),
    ],
    ids=["garbage", "malformed", "server-error", "refused", "timeout"],
)
async def test_failures_are_no_judgement(behaviour: Any) -> None:
    async with FakeOpenAI() as fake:
        fake.queue(behaviour)
        provider = provider_for(fake)
        judge = LLMJudge(provider, timeout_s=0.5)
        try:
            assert await judge.judge("que dia estranho") is None
        finally:
            await provider.close()
        assert judge.asked == 1 and judge.failed == 1


async def test_a_dead_server_is_no_judgement() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    provider = OpenAICompatibleProvider(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    try:
        assert await LLMJudge(provider, timeout_s=2.0).judge("oi") is None
    finally:
        await provider.close()


def judge_responder(answer: str | Callable[[str], str]) -> Callable[[dict[str, Any]], str]:
    """Answers the judge's requests with ``answer`` (of the message text) and every other
    request (the reply) with a fixed text."""

    def respond(payload: dict[str, Any]) -> str:
        messages = payload["messages"]
        if "classify the emotion" in messages[0]["content"]:
            text = messages[-1]["content"]
            return answer(text) if callable(answer) else answer
        return "Entendo."

    return respond


def openai_settings(tmp_path: Any, url: str, **emotion: Any) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        llm={"provider": "openai", "base_url": url, "model": "fake-model", "max_retries": 0},
        embedding={"backend": "hashing"},
        emotion={"detector": "lexicon", **emotion},
    )


def judge_requests(fake: FakeOpenAI) -> list[Any]:
    return [r for r in fake.completion_requests if "classify" in r.messages[0]["content"]]


async def stored_state(engine: Any, user: str) -> EmotionalState:
    profile = (await engine.storage.users.get(f"telegram:{user}")).profile
    return EmotionalState.from_dict(profile["emotion"])


async def test_llm_detector_in_the_pipeline_judges_every_message(tmp_path: Any) -> None:
    async with FakeOpenAI(
        default=judge_responder('{"label": "triste", "confidence": 0.9}')
    ) as fake:
        engine = build_engine(openai_settings(tmp_path, fake.url, detector="llm"))
        await engine.start()
        try:
            # The word lists read this as agressivo; the judge says triste, and wins.
            await ask(engine, make_message(HOSTILE, user="1"))
            assert (await stored_state(engine, "1")).emotional_state == "triste"
            assert len(judge_requests(fake)) == 1
            assert engine.pipeline.names.index("emotion_judge") < engine.pipeline.names.index(
                "prompt"
            )
        finally:
            await engine.close()


async def test_a_failing_judge_leaves_the_classifiers_reading(tmp_path: Any) -> None:
    async with FakeOpenAI(default=judge_responder("não sei dizer")) as fake:
        engine = build_engine(openai_settings(tmp_path, fake.url, detector="llm"))
        await engine.start()
        try:
            responder = await ask(engine, make_message(HOSTILE, user="2"))
            assert (await stored_state(engine, "2")).emotional_state == "agressivo"
            assert responder.texts == ["Entendo."]
        finally:
            await engine.close()


async def test_the_tie_breaker_asks_only_about_unsure_readings(tmp_path: Any) -> None:
    async with FakeOpenAI(default=judge_responder('{"label": "feliz", "confidence": 0.7}')) as fake:
        # The word lists are sure of a plain insult (0.95), less of what they cannot read
        # (neutro, 0.6).
        engine = build_engine(openai_settings(tmp_path, fake.url, judge_below=0.7))
        await engine.start()
        try:
            await ask(engine, make_message(HOSTILE, user="3"))
            assert judge_requests(fake) == []
            await ask(engine, make_message("hoje foi um dia daqueles", user="4"))
            assert len(judge_requests(fake)) == 1
            assert (await stored_state(engine, "4")).emotional_state == "feliz"
        finally:
            await engine.close()
        off = build_engine(openai_settings(tmp_path / "off", fake.url, judge=False))
        assert "emotion_judge" not in off.pipeline.names


async def test_the_judge_runs_while_recall_does(tmp_path: Any) -> None:
    """When recall is over, the judge's request has already reached the server and is
    still being answered: the two overlap, and the reading is settled before the prompt."""
    seen: dict[str, Any] = {}
    async with FakeOpenAI() as fake:
        fake.default = judge_responder('{"label": "confuso", "confidence": 0.8}')
        engine = build_engine(openai_settings(tmp_path, fake.url, detector="llm"))

        async def after_recall(ctx: TurnContext, call_next: CallNext) -> None:
            pending = ctx.extras.get(PENDING_KEY)
            seen["pending"] = pending is not None and not pending[1].done()
            # The request is on the wire (the server holds its answer back meanwhile).
            for _ in range(200):
                if judge_requests(fake):
                    break
                await asyncio.sleep(0.01)
            seen["received"] = len(judge_requests(fake))
            await call_next()

        after_recall.name = "probe"  # type: ignore[attr-defined]
        engine.pipeline.add(after_recall, after="recall")  # type: ignore[arg-type]
        fake.queue(Reply('{"label": "confuso", "confidence": 0.8}', delay_s=1.0))
        await engine.start()
        try:
            await ask(engine, make_message("como assim?", user="5"))
        finally:
            await engine.close()
    assert seen == {"pending": True, "received": 1}
    assert isinstance(engine.pipeline.get("emotion"), EmotionStage)
    assert isinstance(engine.pipeline.get("emotion_judge"), EmotionJudgeStage)


def test_the_cli_path_judges_with_a_provider_of_its_own(tmp_path: Any) -> None:
    answers = iter(['{"label": "feliz", "confidence": 0.66}', "lixo"])
    with FakeOpenAI.in_thread(default=judge_responder(lambda _text: next(answers))) as fake:
        detector = build_detector_from_settings(openai_settings(tmp_path, fake.url, detector="llm"))
        assert isinstance(detector, LLMDetector) and isinstance(detector.fallback, LexiconDetector)
        assert detector.detect("que coisa") == EmotionReading("feliz", 0.66)
        # Garbage: the fallback's reading.
        assert detector.detect(HOSTILE) == LexiconDetector().detect(HOSTILE)
        assert "que coisa" in judge_requests(fake)[0].messages[1]["content"]


def test_the_emotion_command_with_the_llm_detector(tmp_path: Any) -> None:
    """``akira-bot emotion TEXT --json`` with AKIRA_EMOTION__DETECTOR=llm: the judge's
    reading; with the server gone, the classifier's, still exit 0."""
    from tests.adapters.console.test_console_pipe import run_cli

    with FakeOpenAI.in_thread(default='{"label": "confuso", "confidence": 0.77}') as fake:
        env = {
            "AKIRA_LLM__PROVIDER": "openai",
            "AKIRA_LLM__BASE_URL": fake.url,
            "AKIRA_LLM__MAX_RETRIES": "0",
            "AKIRA_EMOTION__DETECTOR": "llm",
        }
        proc = run_cli(["emotion", HOSTILE, "--json"], "", tmp_path, **env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"label": "confuso", "score": 0.77}
    proc = run_cli(["emotion", HOSTILE, "--json"], "", tmp_path, **env)  # nothing listens now
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["label"] == "agressivo"
