"""Feedback in PostgreSQL (schema version 70, core.storage.postgres.schema): the records
are :mod:`core.storage.feedback_records`'; this is their SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.storage.api import FeedbackStore
from core.storage.feedback_records import (
    CORRECTION_COLUMNS,
    RATING_COLUMNS,
    REPLY_COLUMNS,
    FeedbackTotals,
    MoodCorrection,
    Rating,
    ReplyMessage,
    ReplyRating,
    correction_args,
    correction_from_row,
    rating_args,
    rating_from_row,
    reply_from_row,
    totals_from_rows,
)
from core.storage.postgres.database import PgDatabase, affected
from core.storage.records import to_ts


class PgFeedbackStore(FeedbackStore):
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def link_replies(
        self, owner: str, chat_id: str, message_ids: Sequence[str], node_id: str, at: datetime
    ) -> None:
        if not message_ids:
            return
        async with self.db.transaction() as conn:
            await conn.executemany(
                f"INSERT INTO feedback_replies({REPLY_COLUMNS}) VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (owner, chat_id, message_id)"
                " DO UPDATE SET node_id = EXCLUDED.node_id, at = EXCLUDED.at",
                [(owner, chat_id, str(m), node_id, to_ts(at)) for m in message_ids],
            )

    async def reply_node(self, owner: str, chat_id: str, message_id: str) -> str | None:
        value = await self.db.fetchval(
            "SELECT node_id FROM feedback_replies"
            " WHERE owner = $1 AND chat_id = $2 AND message_id = $3",
            owner,
            chat_id,
            message_id,
        )
        return None if value is None else str(value)

    async def replies(self, owner: str) -> list[ReplyMessage]:
        rows = await self.db.fetch(
            f"SELECT {REPLY_COLUMNS} FROM feedback_replies WHERE owner = $1 ORDER BY at, seq",
            owner,
        )
        return [reply_from_row(row) for row in rows]

    async def rate(self, rating: ReplyRating) -> bool:
        inserted = await self.db.fetchval(
            f"INSERT INTO feedback_ratings({RATING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            " ON CONFLICT (owner, node_id, rating) DO UPDATE SET at = EXCLUDED.at,"
            " emoji = EXCLUDED.emoji, chat_id = EXCLUDED.chat_id,"
            " message_id = EXCLUDED.message_id"
            " RETURNING (xmax = 0)",
            *rating_args(rating),
        )
        return bool(inserted)

    async def unrate(self, owner: str, node_id: str, rating: Rating) -> bool:
        status = await self.db.execute(
            "DELETE FROM feedback_ratings WHERE owner = $1 AND node_id = $2 AND rating = $3",
            owner,
            node_id,
            rating.value,
        )
        return affected(status) > 0

    async def ratings(self, owner: str) -> list[ReplyRating]:
        rows = await self.db.fetch(
            f"SELECT {RATING_COLUMNS} FROM feedback_ratings WHERE owner = $1 ORDER BY at, seq",
            owner,
        )
        return [rating_from_row(row) for row in rows]

    async def add_correction(self, correction: MoodCorrection) -> None:
        await self.db.execute(
            f"INSERT INTO mood_corrections({CORRECTION_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            *correction_args(correction),
        )

    async def corrections(self, owner: str) -> list[MoodCorrection]:
        rows = await self.db.fetch(
            f"SELECT {CORRECTION_COLUMNS} FROM mood_corrections WHERE owner = $1 ORDER BY at, seq",
            owner,
        )
        return [correction_from_row(row) for row in rows]

    async def totals(self) -> FeedbackTotals:
        ratings = await self.db.fetch(
            "SELECT rating, count(*) FROM feedback_ratings GROUP BY rating"
        )
        corrections = await self.db.fetch(
            "SELECT predicted, corrected, count(*) FROM mood_corrections"
            " GROUP BY predicted, corrected"
        )
        return totals_from_rows(ratings, corrections)

    async def delete_owner(self, owner: str) -> int:
        removed = 0
        async with self.db.transaction() as conn:
            for table in ("feedback_ratings", "mood_corrections", "feedback_replies"):
                removed += affected(
                    await conn.execute(f"DELETE FROM {table} WHERE owner = $1", owner)
                )
        return removed
