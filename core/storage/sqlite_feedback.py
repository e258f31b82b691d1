"""Feedback in SQLite (schema version 70, see core.storage.sqlite_schema): the records
are :mod:`core.storage.feedback_records`'; this is their SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.storage.api import FeedbackStore
from core.storage.database import Database
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
from core.storage.records import to_ts


class SQLiteFeedbackStore(FeedbackStore):
    def __init__(self, db: Database) -> None:
        self.db = db

    async def link_replies(
        self, owner: str, chat_id: str, message_ids: Sequence[str], node_id: str, at: datetime
    ) -> None:
        if not message_ids:
            return
        async with self.db.transaction() as conn:
            await conn.executemany(
                f"INSERT OR REPLACE INTO feedback_replies({REPLY_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                [(owner, chat_id, str(m), node_id, to_ts(at)) for m in message_ids],
            )

    async def reply_node(self, owner: str, chat_id: str, message_id: str) -> str | None:
        row = await self.db.fetchone(
            "SELECT node_id FROM feedback_replies"
            " WHERE owner = ? AND chat_id = ? AND message_id = ?",
            (owner, chat_id, message_id),
        )
        return str(row[0]) if row else None

    async def replies(self, owner: str) -> list[ReplyMessage]:
        rows = await self.db.fetchall(
            f"SELECT {REPLY_COLUMNS} FROM feedback_replies WHERE owner = ? ORDER BY at, rowid",
            (owner,),
        )
        return [reply_from_row(row) for row in rows]

    async def rate(self, rating: ReplyRating) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "UPDATE feedback_ratings SET at = ?, emoji = ?, chat_id = ?, message_id = ?"
                " WHERE owner = ? AND node_id = ? AND rating = ?",
                (
                    to_ts(rating.at),
                    rating.emoji,
                    rating.chat_id,
                    rating.message_id,
                    rating.owner,
                    rating.node_id,
                    rating.rating.value,
                ),
            )
            if cur.rowcount:
                return False
            await conn.execute(
                f"INSERT INTO feedback_ratings({RATING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rating_args(rating),
            )
            return True

    async def unrate(self, owner: str, node_id: str, rating: Rating) -> bool:
        async with self.db.transaction() as conn:
            cur = await conn.execute(
                "DELETE FROM feedback_ratings WHERE owner = ? AND node_id = ? AND rating = ?",
                (owner, node_id, rating.value),
            )
            return bool(cur.rowcount)

    async def ratings(self, owner: str) -> list[ReplyRating]:
        rows = await self.db.fetchall(
            f"SELECT {RATING_COLUMNS} FROM feedback_ratings WHERE owner = ? ORDER BY at, rowid",
            (owner,),
        )
        return [rating_from_row(row) for row in rows]

    async def add_correction(self, correction: MoodCorrection) -> None:
        async with self.db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO mood_corrections({CORRECTION_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                correction_args(correction),
            )

    async def corrections(self, owner: str) -> list[MoodCorrection]:
        rows = await self.db.fetchall(
            f"SELECT {CORRECTION_COLUMNS} FROM mood_corrections WHERE owner = ? ORDER BY at, rowid",
            (owner,),
        )
        return [correction_from_row(row) for row in rows]

    async def totals(self) -> FeedbackTotals:
        ratings = await self.db.fetchall(
            "SELECT rating, COUNT(*) FROM feedback_ratings GROUP BY rating"
        )
        corrections = await self.db.fetchall(
            "SELECT predicted, corrected, COUNT(*) FROM mood_corrections"
            " GROUP BY predicted, corrected"
        )
        return totals_from_rows(ratings, corrections)

    async def delete_owner(self, owner: str) -> int:
        removed = 0
        async with self.db.transaction() as conn:
            for table in ("feedback_ratings", "mood_corrections", "feedback_replies"):
                cur = await conn.execute(f"DELETE FROM {table} WHERE owner = ?", (owner,))
                removed += cur.rowcount or 0
        return removed
