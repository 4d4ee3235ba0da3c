"""Many conversations' claims and settlements in one transaction.

A deliverer serving many conversations at once has, at any moment, some
sends just answered (to settle), some about to go (to claim) and some whose
call starts now (to mark started). Each claim and each start must be
committed before its call, each settlement after it; nothing says they need a
transaction each. One :class:`Exchange` records the settlements and pauses,
marks the calls started, then claims the rows and takes their send slots, and
commits: every claim and start it answers is durable before the caller goes on.

A claim waits for its slot, its platform's calls in flight and the send gate
before its call; only the start says the call is under way. A row claimed
but not started when its process died cannot have reached the platform, so
recovery sends it again.

The pacing rows the exchange touches are locked together, in one order on
every replica (no deadlock), read once, moved on in memory card by card, and
written back once each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from watchkeeper.clock import to_epoch
from watchkeeper.store.schema.cluster import chat_pacing
from watchkeeper.store.schema.notify import deliveries

P = chat_pacing.c
D = deliveries.c
#: Longest place name a pacing row keeps.
PLACE_LIMIT = 400


@dataclass(frozen=True, slots=True)
class ClaimAsk:
    """One row to claim, and the pacing rows its send slot is taken from."""

    delivery_id: int
    #: Each pacing row and its gap (seconds between two sends it allows).
    gaps: dict[str, float]
    #: Rows allowing a burst: how long before their ``next_at`` a send may go.
    bursts: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a claimed row ends up after its call (see ``OutboxStore.settle``)."""

    delivery_id: int
    status: str
    message_id: str | None = None
    error: str | None = None
    next_attempt_at: datetime | None = None
    #: The platform was not called: the claim's attempt is given back.
    uncalled: bool = False
    #: The call's outcome is unknown and the row goes back to pending to be sent again (the
    #: platform recognises the resend): when that call started, kept if an earlier one was.
    unsure_since: datetime | None = None


@dataclass(frozen=True, slots=True)
class Exchange:
    """What one transaction records and claims.

    ``holds`` keep pacing rows from any slot before their moment; they and the
    settlements are recorded before the claims, so a conversation's next
    claim sees what its last call said.
    """

    claimer: str
    now: datetime
    claim_for: timedelta
    #: The pace clock's now (epoch seconds) and how far ahead a slot may be.
    now_s: float
    max_wait_s: float
    settlements: Sequence[Settlement] = ()
    holds: Mapping[str, float] = field(default_factory=dict)
    claims: Sequence[ClaimAsk] = ()
    #: Rows of this claimer whose calls start now.
    starts: Sequence[int] = ()


_NEW_PACE = {
    sqlite: insert(chat_pacing)
    .values(place=bindparam("b_place"), next_at=bindparam("b_next"))
    .on_conflict_do_nothing(index_elements=[P.place])
    for sqlite, insert in ((True, sqlite_insert), (False, postgresql_insert))
}


def lock_paces(
    conn: Connection, sqlite: bool, places: Sequence[str], now_s: float
) -> dict[str, float]:
    """Every row of ``places`` (made when new), locked for this transaction in one order."""
    if not places:
        return {}
    # Many rows of one statement rather than one statement of many rows: compiled once.
    conn.execute(_NEW_PACE[sqlite], [{"b_place": place, "b_next": now_s} for place in places])
    query = select(P.place, P.next_at).where(P.place.in_(places)).order_by(P.place)
    if not sqlite:  # SQLite's BEGIN IMMEDIATE already holds every other writer off
        query = query.with_for_update()
    return {row.place: float(row.next_at) for row in conn.execute(query)}


def slot_at(ask: ClaimAsk, paces: Mapping[str, float], now_s: float) -> float:
    """The earliest moment every pacing row of ``ask`` allows."""
    return max([now_s, *(paces[p[:PLACE_LIMIT]] - ask.bursts.get(p, 0.0) for p in ask.gaps)])


def take(ask: ClaimAsk, paces: dict[str, float], at: float) -> None:
    """Spend the slot at ``at``: each row moves on by its gap from ``at`` (or from its own
    moment, still ahead when the row allows a burst)."""
    for place, gap in ask.gaps.items():
        key = place[:PLACE_LIMIT]
        paces[key] = max(paces[key], at) + gap


def claim_statement(exchange: Exchange, ids: Sequence[int]) -> Any:
    """pending -> sending for the exchange's claimer, of the rows of ``ids`` still pending."""
    now = to_epoch(exchange.now)
    return (
        update(deliveries)
        .where(D.id.in_(ids), D.status == "pending")
        .values(
            status="sending",
            claimed_by=exchange.claimer[:200],
            claim_until=to_epoch(exchange.now + exchange.claim_for),
            attempts=D.attempts + 1,
            updated_at=now,
            call_started_at=None,
        )
        .returning(D.id)
    )


def start_statement(exchange: Exchange, ids: Sequence[int]) -> Any:
    """The calls of ``ids`` start now: only rows still ``sending`` under the exchange's claimer
    (a row recovered from a claimer thought gone, and claimed again, is no longer its own)."""
    return (
        update(deliveries)
        .where(D.id.in_(ids), D.status == "sending", D.claimed_by == exchange.claimer[:200])
        .values(call_started_at=to_epoch(exchange.now))
        .returning(D.id)
    )


def start_all(conn: Connection, exchange: Exchange) -> set[int]:
    """Mark the exchange's calls started; the rows it could mark (the claimer's own)."""
    if not exchange.starts:
        return set()
    return set(conn.execute(start_statement(exchange, list(exchange.starts))).scalars())


#: Sent rows, many at once: only a row still ``sending`` under the same claimer moves, its
#: message id kept if known.
SENT_MANY = (
    update(deliveries)
    .where(D.id == bindparam("b_id"), D.status == "sending", D.claimed_by == bindparam("b_by"))
    .values(
        status="sent",
        updated_at=bindparam("b_at"),
        error=None,
        platform_message_id=func.coalesce(bindparam("b_message"), D.platform_message_id),
    )
)

PACE_MANY = (
    update(chat_pacing).where(P.place == bindparam("b_place")).values(next_at=bindparam("b_next"))
)


def write_paces(conn: Connection, before: Mapping[str, float], after: Mapping[str, float]) -> None:
    """The rows whose moment moved, in one statement."""
    moved = [{"b_place": p, "b_next": at} for p, at in sorted(after.items()) if at != before[p]]
    if moved:
        conn.execute(PACE_MANY, moved)


def sent_many(
    conn: Connection, settlements: Sequence[Settlement], now: datetime, claimer: str
) -> None:
    """Record the settlements that say ``sent``, of rows ``claimer`` holds, in one statement."""
    at = to_epoch(now)
    rows = [
        {"b_id": s.delivery_id, "b_at": at, "b_message": s.message_id, "b_by": claimer[:200]}
        for s in settlements
        if s.status == "sent"
    ]
    if rows:
        conn.execute(SENT_MANY, rows)


@dataclass(frozen=True, slots=True)
class NotYet:
    """A claim not made: the delivery's slot is further off than the claim may wait."""

    at_s: float


@dataclass(frozen=True, slots=True)
class Exchanged:
    """What one exchange answers: each claim's answer, in the order asked (see
    :func:`claim_all`), and the rows whose calls it marked started."""

    claims: list[float | bool | NotYet]
    started: set[int]


def claim_all(
    conn: Connection, exchange: Exchange, paces: dict[str, float]
) -> list[float | bool | NotYet]:
    """Claim what the exchange asks for: per ask, the moment of its slot, ``False`` when the
    row is no longer pending, ``NotYet`` when its slot is further off than the exchange may
    wait (nothing taken then). ``paces`` moves on by every slot taken."""
    start = dict(paces)
    limit = exchange.now_s + exchange.max_wait_s
    fits: list[ClaimAsk] = []
    for ask in exchange.claims:  # the slots as if every row were still pending
        at = slot_at(ask, paces, exchange.now_s)
        if at <= limit:
            take(ask, paces, at)
            fits.append(ask)
    claimed: set[int] = set()
    if fits:
        ids = [ask.delivery_id for ask in fits]
        claimed = set(conn.execute(claim_statement(exchange, ids)).scalars())
    # Only a claimed row spends a slot: the slots again, over the rows claimed.
    paces.clear()
    paces.update(start)
    tried = {ask.delivery_id for ask in fits}
    answers: list[float | bool | NotYet] = []
    for ask in exchange.claims:
        at = slot_at(ask, paces, exchange.now_s)
        if ask.delivery_id in claimed:
            take(ask, paces, at)
            answers.append(at)
        else:
            answers.append(False if ask.delivery_id in tried else NotYet(at))
    return answers
