"""The feedback part of the storage contract (core.storage.api.FeedbackStore), on every
backend: reply messages linked per chat, ratings kept apart by kind, corrections as
labelled examples, admins' totals, owner isolation, export and forget-me."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.storage import Storage
from core.storage.feedback_records import MoodCorrection, Rating, ReplyRating
from tests.core.storage.contract.conftest import Opener

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
A, B = "telegram:1", "telegram:2"


def rating(owner: str, node_id: str, kind: Rating, *, minutes: float = 0) -> ReplyRating:
    return ReplyRating(
        owner=owner,
        node_id=node_id,
        rating=kind,
        chat_id="c1",
        message_id=f"m-{node_id}",
        emoji="👍" if kind is Rating.UP else "👎",
        at=T0 + timedelta(minutes=minutes),
    )


def correction(owner: str, predicted: str, corrected: str, *, minutes: float = 0) -> MoodCorrection:
    return MoodCorrection(
        owner=owner,
        text=f"{owner} said something",
        predicted=predicted,
        corrected=corrected,
        at=T0 + timedelta(minutes=minutes),
        node_id=f"{owner}-n",
        predicted_score=0.8,
    )


async def test_reply_messages_are_found_per_owner_and_chat(storage: Storage) -> None:
    feedback = storage.feedback
    await feedback.link_replies(A, "c1", ["10", "11"], "reply-1", T0)
    await feedback.link_replies(A, "c1", [], "reply-2", T0)  # nothing sent: nothing linked
    assert await feedback.reply_node(A, "c1", "10") == "reply-1"
    assert await feedback.reply_node(A, "c1", "11") == "reply-1"  # every part of a long reply
    assert await feedback.reply_node(A, "c2", "10") is None  # Telegram: ids are per chat
    assert await feedback.reply_node(B, "c1", "10") is None  # another person's turn
    assert [(m.message_id, m.node_id) for m in await feedback.replies(A)] == [
        ("10", "reply-1"),
        ("11", "reply-1"),
    ]


async def test_ratings_are_kept_apart_by_kind_and_owner(storage: Storage) -> None:
    feedback = storage.feedback
    assert await feedback.rate(rating(A, "r1", Rating.UP))
    assert not await feedback.rate(rating(A, "r1", Rating.UP, minutes=5))  # again: moved
    assert await feedback.rate(rating(A, "r1", Rating.DOWN, minutes=1))
    assert await feedback.rate(rating(B, "r9", Rating.DOWN))
    ratings = await feedback.ratings(A)
    assert [(r.rating, r.at) for r in ratings] == [
        (Rating.DOWN, T0 + timedelta(minutes=1)),
        (Rating.UP, T0 + timedelta(minutes=5)),
    ]
    assert await feedback.unrate(A, "r1", Rating.UP)
    assert not await feedback.unrate(A, "r1", Rating.UP)  # already gone
    assert not await feedback.unrate(A, "r9", Rating.DOWN)  # B's, not A's
    assert [r.rating for r in await feedback.ratings(A)] == [Rating.DOWN]
    assert [r.node_id for r in await feedback.ratings(B)] == ["r9"]


async def test_corrections_are_labelled_examples_and_totals_count_everyone(
    storage: Storage,
) -> None:
    feedback = storage.feedback
    await feedback.add_correction(correction(A, "agressivo", "neutro"))
    await feedback.add_correction(correction(A, "triste", "feliz", minutes=2))
    await feedback.add_correction(correction(B, "agressivo", "triste", minutes=1))
    await feedback.rate(rating(A, "r1", Rating.UP))
    await feedback.rate(rating(B, "r2", Rating.UP))
    await feedback.rate(rating(B, "r3", Rating.DOWN))
    (first, second) = await feedback.corrections(A)
    assert (first.text, first.predicted, first.corrected) == (
        f"{A} said something",
        "agressivo",
        "neutro",
    )
    assert first.predicted_score == 0.8 and first.node_id == f"{A}-n" and first.at == T0
    assert (second.predicted, second.corrected) == ("triste", "feliz")
    totals = await feedback.totals()
    assert (totals.up, totals.down, totals.ratings) == (2, 1, 3)
    assert totals.corrected_from == {"agressivo": 2, "triste": 1}
    assert totals.corrected_to == {"neutro": 1, "feliz": 1, "triste": 1}
    assert totals.corrections == 3


async def test_feedback_is_exported_and_forgotten_with_the_person(
    opener: Opener, storage: Storage
) -> None:
    for owner in (A, B):
        await storage.feedback.link_replies(owner, "c1", ["10"], f"{owner}-reply", T0)
        await storage.feedback.rate(rating(owner, f"{owner}-reply", Rating.UP))
        await storage.feedback.add_correction(correction(owner, "agressivo", "neutro"))
    export = (await storage.export_owner(A))["feedback"]
    assert [r["rating"] for r in export["ratings"]] == ["up"]
    assert [c["corrected"] for c in export["corrections"]] == ["neutro"]
    assert [m["message_id"] for m in export["reply_messages"]] == ["10"]
    assert B not in str(export)

    removed = await storage.forget_owner(A)
    assert removed["feedback"] == 3
    assert "feedback" not in await storage.export_owner(A)  # nothing left: no section
    assert await storage.feedback.reply_node(A, "c1", "10") is None
    # Another process on the same database sees the same (nothing is cached).
    async with opener() as other:
        assert await other.feedback.ratings(A) == []
        assert len(await other.feedback.ratings(B)) == 1
        assert len(await other.feedback.corrections(B)) == 1
