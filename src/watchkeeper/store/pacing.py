"""Send slots shared by every replica: one row per place, the next free moment.

Platforms limit posts per conversation and, some, per bot across every
conversation (Telegram's 30 a second): replicas take their slots from these
rows, so N of them send no faster than one would. A platform-wide limit is a
row of its own (``*telegram``) taken in the same transaction as the
conversation's, so the send goes at the later of the two moments and both
rows move on from there.

A row may allow a burst: with ``burst_s`` its ``next_at`` is the moment its
allowance would be back in full (a virtual schedule, one ``gap`` per send),
and a send may go ``burst_s`` before it. A Telegram group's 20 a minute is a
row with a 3 s gap and a 57 s burst: 20 at once, then one every 3 s.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, case, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.store.base import Accessor
from watchkeeper.store.schema.cluster import chat_pacing

P = chat_pacing.c


def platform_place(channel: str) -> str:
    """The pacing row of a platform's limit across all its conversations."""
    return f"*{channel}"


def earliest(
    conn: Connection,
    sqlite: bool,
    places: list[str],
    now_s: float,
    bursts: Mapping[str, float] | None = None,
) -> float:
    """The earliest moment every row of ``places`` allows (a row with a burst allowance
    ``bursts[place]`` that much before its ``next_at``), locked for this transaction."""
    dialect_insert = sqlite_insert if sqlite else postgresql_insert
    bursts = {p[:400]: b for p, b in (bursts or {}).items()}
    places = sorted(p[:400] for p in places)  # one lock order for every replica: no deadlock
    for place in places:
        conn.execute(
            dialect_insert(chat_pacing)
            .values(place=place, next_at=now_s)
            .on_conflict_do_nothing(index_elements=[P.place])
        )
    query = select(P.place, P.next_at).where(P.place.in_(places))
    if not sqlite:  # SQLite's BEGIN IMMEDIATE already holds every other writer off
        query = query.with_for_update()
    rows = conn.execute(query).all()
    return max([now_s, *(float(r.next_at) - bursts.get(r.place, 0.0) for r in rows)])


def next_slot(
    conn: Connection,
    sqlite: bool,
    places: list[str],
    now_s: float,
    max_wait_s: float,
    bursts: Mapping[str, float] | None = None,
) -> float | None:
    """The earliest moment every row of ``places`` allows, locked for this transaction;
    ``None`` when it is more than ``max_wait_s`` away. Nothing is taken yet."""
    at = earliest(conn, sqlite, places, now_s, bursts)
    return None if at > now_s + max_wait_s else at


def take_slot(conn: Connection, gaps: Mapping[str, float], at: float) -> None:
    """Spend the slot at ``at``: each place's schedule moves on by its ``gap`` from ``at``
    (or from its own ``next_at``, still ahead when the row allows a burst)."""
    for place, gap in gaps.items():
        later = case((P.next_at > at, P.next_at), else_=at)
        conn.execute(update(chat_pacing).where(P.place == place[:400]).values(next_at=later + gap))


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
        self.hold_all({place: until_s})

    def hold_all(self, until: Mapping[str, float]) -> None:
        """No slot for each place before its moment in ``until``, in one transaction."""
        with self._write("pausing a conversation") as conn:
            earliest(conn, self._sqlite, list(until), min(until.values()))
            for place, until_s in until.items():
                conn.execute(
                    update(chat_pacing)
                    .where(P.place == place[:400], P.next_at < until_s)
                    .values(next_at=until_s)
                )
