"""A small NoneBug-style helper for chat tests: say what a person sends and what the bot
should send back, then run it through the real engine.

    async with ChatScenario(engine, user="42") as chat:
        chat.receive("/remember food: pizza").should_call_send("Saved", private=False)
        chat.receive("/stats").should_call_send("admins only")

On leaving the block every message is handled in order and each one's replies are checked
against its expectations, one expectation per reply (like NoneBug's ``should_call_send``
followed by ``should_finished``: an unexpected extra reply fails the test).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from akira_bot.testing.messages import ask, make_message
from core.types import MessageHandler, Reply, ReplyKind


@dataclass
class Expectation:
    contains: tuple[str, ...]
    absent: tuple[str, ...] = ()
    private: bool | None = None
    kind: ReplyKind | None = None
    attachment: bool | None = None

    def check(self, reply: Reply, where: str) -> None:
        for part in self.contains:
            assert part in reply.text, f"{where}: expected {part!r} in {reply.text!r}"
        for part in self.absent:
            assert part not in reply.text, f"{where}: did not expect {part!r} in {reply.text!r}"
        if self.private is not None:
            assert reply.private is self.private, f"{where}: private={reply.private}"
        if self.kind is not None:
            assert reply.kind is self.kind, f"{where}: kind={reply.kind}"
        if self.attachment is not None:
            assert (reply.attachment is not None) is self.attachment, f"{where}: attachment"


@dataclass
class Turn:
    text: str
    options: dict[str, Any]
    expectations: list[Expectation] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)

    def should_call_send(
        self,
        *contains: str,
        absent: tuple[str, ...] = (),
        private: bool | None = None,
        kind: ReplyKind | None = ReplyKind.COMMAND,
        attachment: bool | None = None,
    ) -> Turn:
        self.expectations.append(Expectation(contains, absent, private, kind, attachment))
        return self

    def should_not_send(self) -> Turn:
        return self  # no expectations: any reply fails the check

    @property
    def reply(self) -> Reply:
        assert self.replies, f"no reply to {self.text!r}"
        return self.replies[0]


class ChatScenario:
    """Messages from one person (``user`` on ``platform``) at increasing message times."""

    def __init__(
        self,
        engine: MessageHandler,
        *,
        user: str = "42",
        platform: str = "telegram",
        admin: bool = False,
        start: datetime | None = None,
        step: timedelta = timedelta(seconds=10),
        **defaults: Any,
    ) -> None:
        self.engine = engine
        self.defaults = {"user": user, "platform": platform, "admin": admin, **defaults}
        self.clock = start or datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
        self.step = step
        self.turns: list[Turn] = []

    def receive(self, text: str, **options: Any) -> Turn:
        turn = Turn(text, options)
        self.turns.append(turn)
        return turn

    async def run(self) -> None:
        for turn in self.turns:
            if turn.replies:
                continue  # already run
            options = {**self.defaults, **turn.options}
            if "at" not in options:
                self.clock += self.step
                options["at"] = self.clock
            responder = await ask(self.engine, make_message(turn.text, **options))
            turn.replies = list(responder.sent)
            where = f"reply to {turn.text!r}"
            assert len(turn.replies) == len(turn.expectations), (
                f"{where}: expected {len(turn.expectations)} reply(ies), got "
                f"{[r.text for r in turn.replies]}"
            )
            for reply, expectation in zip(turn.replies, turn.expectations, strict=True):
                expectation.check(reply, where)

    async def __aenter__(self) -> ChatScenario:
        return self

    async def __aexit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            await self.run()
