"""The memory graph through the real engine: build_engine picks it, the pipeline stores
every message in it and recalls from it into the prompt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from akira_bot.app import build_engine
from akira_bot.settings import Settings
from core.llm import ScriptedProvider
from core.memory.graph import GraphMemory
from core.stages.basic import RECALL_TITLE
from core.types import ChatKind, ChatRef, IncomingMessage, RecordingResponder, UserRef

T0 = datetime(2024, 5, 10, 20, 0, tzinfo=UTC)


def message(
    text: str, at: datetime, message_id: str, *, user: str = "42", kind: ChatKind = ChatKind.DM
) -> IncomingMessage:
    chat = ChatRef(
        "telegram",
        f"dm-{user}" if kind is ChatKind.DM else "group-1",
        kind,
        scope=None if kind is ChatKind.DM else "group-1",
    )
    return IncomingMessage(
        platform="telegram",
        chat=chat,
        author=UserRef("telegram", user, display_name="Ana"),
        text=text,
        message_id=message_id,
        sent_at=at,
    )


def recalled_section(prompt_system: str) -> str:
    marker = f"## {RECALL_TITLE}\n"
    if marker not in prompt_system:
        return ""
    return prompt_system.split(marker, 1)[1].split("\n## ", 1)[0]


async def test_build_engine_uses_the_graph_and_the_third_message_recalls_the_first(
    tmp_path: Path,
) -> None:
    # history_turns=0: the recent turns are not in the prompt, so whatever the prompt
    # holds of the first message came through the memory graph.
    settings = Settings(
        data_dir=tmp_path,
        llm={"provider": "scripted"},
        embedding={"backend": "hashing"},
        memory={"history_turns": 0},
    )
    provider = ScriptedProvider(
        ["Que chato, sinto muito.", "Tome com água.", "Que bom falar com você!"]
    )
    engine = build_engine(settings, llm=provider)
    assert isinstance(engine.services.memory, GraphMemory)
    async with engine:
        for text, at, mid in (
            ("Tenho dor de cabeça", T0, "1"),
            ("Tomo remédio?", T0 + timedelta(minutes=5), "2"),
            ("Ficou melhor?", T0 + timedelta(days=30), "3"),
        ):
            responder = RecordingResponder()
            await engine.handle(message(text, at, mid), responder)
            assert responder.texts
        system = provider.prompts[-1][0].content
        section = recalled_section(system)
        assert "Tenho dor de cabeça" in section
        assert "30 days ago" in section or "1 month ago" in section or "days ago" in section
        assert "Ficou melhor?" not in section  # the message itself is not a memory
        # Every message and reply became a node with a vector; links were stored (the
        # last reply is stored off its path: settled first).
        await engine.services.memory.settle()
        storage = engine.storage
        assert await storage.graph.node_count_with_vectors("telegram:42") == 6
        exported = await storage.export_owner("telegram:42")
        relations = {c["relation_type"] for c in exported["connections"]}
        assert {"follow_up", "reply_to", "resumes"} <= relations


async def test_default_history_and_recall_together(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, llm={"provider": "scripted"}, embedding={"backend": "hashing"}
    )
    provider = ScriptedProvider(["ok"])
    engine = build_engine(settings, llm=provider)
    async with engine:
        await engine.handle(message("Tenho dor de cabeça", T0, "1"), RecordingResponder())
        await engine.handle(
            message("Tomo remédio?", T0 + timedelta(minutes=5), "2"), RecordingResponder()
        )
        await engine.handle(
            message("Ficou melhor?", T0 + timedelta(days=30), "3"), RecordingResponder()
        )
    prompt = provider.prompts[-1]
    assert any("Tenho dor de cabeça" in m.content for m in prompt)
    assert prompt[-1].content == "Ficou melhor?"


async def test_group_prompt_never_holds_private_memories(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        llm={"provider": "scripted"},
        embedding={"backend": "hashing"},
        memory={"history_turns": 0},
    )
    provider = ScriptedProvider(["ok"])
    engine = build_engine(settings, llm=provider)
    async with engine:
        await engine.handle(message("Meu segredo: dívidas no banco", T0, "1"), RecordingResponder())
        await engine.handle(
            message(
                "Alguém sabe de dívidas no banco?",
                T0 + timedelta(minutes=1),
                "2",
                kind=ChatKind.GROUP,
            ),
            RecordingResponder(),
        )
        # The same question in the DM may use everything.
        await engine.handle(
            message("E as dívidas no banco?", T0 + timedelta(minutes=2), "3"), RecordingResponder()
        )
    group_prompt, dm_prompt = provider.prompts[-2], provider.prompts[-1]
    assert not any("segredo" in m.content for m in group_prompt)
    assert "segredo" in recalled_section(dm_prompt[0].content)
