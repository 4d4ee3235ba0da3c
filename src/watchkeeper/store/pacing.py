"""Per-conversation pacing shared by every replica: one row per place, the next free moment.

Platforms limit posts per conversation, not per process: replicas take their
slots from this one row, so N of them send to a chat no faster than one would.
"""

from __future__ import annotations

from sqlalchemy import case, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.store.base import Accessor
from watchkeeper.store.schema_cluster import chat_pacing

P = chat_pacing.c


class PacingStore(Accessor):
    """Hands out the send slots of each conversation, one at a time across replicas."""

    def reserve(self, place: str, now_s: float, gap_s: float, max_wait_s: float) -> float | None:
        """Take the next slot for ``place``: seconds to wait before sending (0 for now).

        ``None`` when the next free slot is more than ``max_wait_s`` away; then
        nothing is taken. ``now_s`` is wall-clock epoch seconds, the time base
        every replica shares.
        """
        place = place[:400]
        start = case((P.next_at > now_s, P.next_at), else_=now_s)
        # One conditional update: PostgreSQL locks the row and checks the condition again
        # for a replica that waited on it; SQLite runs one writer at a time anyway.
        take = (
            update(chat_pacing)
            .where(P.place == place, P.next_at <= now_s + max_wait_s)
            .values(next_at=start + gap_s)
            .returning(P.next_at)
        )
        dialect_insert = sqlite_insert if self._sqlite else postgresql_insert
        first_use = (
            dialect_insert(chat_pacing)
            .values(place=place, next_at=now_s)
            .on_conflict_do_nothing(index_elements=[P.place])
        )
        with self._write("pacing a conversation") as conn:
            conn.execute(first_use)
            next_at = conn.execute(take).scalar_one_or_none()
        if next_at is None:
            return None
        return max(0.0, float(next_at) - gap_s - now_s)
