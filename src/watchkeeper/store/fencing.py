"""Fenced writes: a singleton loop's writes commit only while its replica still holds the lease.

A loop runs its pass inside :func:`fenced`; every write transaction opened in
that context (threads started with ``asyncio.to_thread`` inherit it) first
touches the lease row on the condition that holder and epoch are still the
pass's own. On PostgreSQL that also locks the row until commit, so a takeover
waits for the write in flight and every write after it is refused: a replica
paused past its lease writes nothing once it resumes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sqlalchemy import Connection, update

from watchkeeper.errors import LeadershipLost
from watchkeeper.store.schema.cluster import LEADER, cluster_lease


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a pass runs under: this replica, at this epoch."""

    replica: str
    epoch: int


_current: ContextVar[Fence | None] = ContextVar("watchkeeper_fence", default=None)


@contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    """Run the block's writes under ``fence`` (``None``: unfenced, a lone process)."""
    token = _current.set(fence)
    try:
        yield
    finally:
        _current.reset(token)


def current_fence() -> Fence | None:
    """The fence writes in this context are checked against, if any."""
    return _current.get()


def check_fence(conn: Connection) -> None:
    """Refuse the transaction on ``conn`` when its pass's lease has moved on."""
    fence = _current.get()
    if fence is None:
        return
    statement = (
        update(cluster_lease)
        .where(
            cluster_lease.c.name == LEADER,
            cluster_lease.c.holder == fence.replica,
            cluster_lease.c.epoch == fence.epoch,
        )
        .values(epoch=cluster_lease.c.epoch)
    )
    if conn.execute(statement).rowcount != 1:
        raise LeadershipLost(
            f"replica {fence.replica} no longer leads (its epoch {fence.epoch} ended); "
            "the write was refused and the new leader will make it"
        )
