"""Send slots shared by every replica: one row per place, the next free moment.

Platforms limit posts per conversation and, some, per bot across every
conversation (Telegram's 30 a second): replicas take their slots from these
rows, so N of them send no faster than one would. A platform-wide limit is a
row of its own (``*telegram``) taken in the same transaction as the
conversation's, so the send goes at the later of the two moments and both
rows move on from there.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.store.base import Accessor
from watchkeeper.store.schema_cluster import chat_pacing

P = chat_pacing.c


def platform_place(channel: str) -> str:
    """The pacing row of a platform's limit across all its conversations."""
    return f"*{channel}"


def next_slot(
    conn: Connection, sqlite: bool, places: list[str], now_s: float, max_wait_s: float
) -> float | None:
    """The earliest moment every row of ``places`` allows, locked for this transaction;
    ``None`` when it is more than ``max_wait_s`` away. Nothing is taken yet."""
    dialect_insert = sqlite_insert if sqlite else postgresql_insert
    places = sorted(p[:400] for p in places)  # one lock order for every replica: no deadlock
    for place in places:
        conn.execute(
            dialect_insert(chat_pacing)
            .values(place=place, next_at=now_s)
            .on_conflict_do_nothing(index_elements=[P.place])
        )
    query = select(P.next_at).where(P.place.in_(places))
    if not sqlite:  # SQLite's BEGIN IMMEDIATE already holds every other writer off
        query = query.with_for_update()
    at = max([now_s, *(float(v) for v in conn.execute(query).scalars())])
    return None if at > now_s + max_wait_s else at


def take_slot(conn: Connection, gaps: dict[str, float], at: float) -> None:
    """Spend the slot at ``at``: each place's next free moment is ``gap`` after it."""
    for place, gap in gaps.items():
        conn.execute(update(chat_pacing).where(P.place == place[:400]).values(next_at=at + gap))


class PacingStore(Accessor):
    """Hands out the send slots of each conversation, one at a time across replicas."""

    def reserve(
        self,
        place: str,
        now_s: float,
        gap_s: float,
        max_wait_s: float,
        *,
        platform: tuple[str, float] | None = None,
    ) -> float | None:
        """Take the next slot for ``place``: seconds to wait before sending (0 for now).

        ``platform`` is a platform-wide row and its gap, taken with the
        conversation's. ``None`` when the next free slot is more than
        ``max_wait_s`` away; then nothing is taken. ``now_s`` is wall-clock
        epoch seconds, the time base every replica shares.
        """
        gaps = {place: gap_s, **dict([platform] if platform else [])}
        with self._write("pacing a conversation") as conn:
            at = next_slot(conn, self._sqlite, list(gaps), now_s, max_wait_s)
            if at is None:
                return None
            take_slot(conn, gaps, at)
        return at - now_s

    def hold(self, place: str, until_s: float) -> None:
        """No slot for ``place`` before ``until_s`` (a platform said its bucket is spent)."""
        with self._write("pausing a conversation") as conn:
            next_slot(conn, self._sqlite, [place], until_s, 0.0)
            conn.execute(
                update(chat_pacing)
                .where(P.place == place[:400], P.next_at < until_s)
                .values(next_at=until_s)
            )
