"""Persistence through SQLAlchemy Core on SQLite or PostgreSQL. No business rules here.

Only this package imports SQLAlchemy; everything above it sees frozen records
and watchkeeper's own errors.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from watchkeeper.store.base import Accessor
    from watchkeeper.store.cluster import ClusterStore
    from watchkeeper.store.decisions import DecisionStore
    from watchkeeper.store.heartbeats import HeartbeatStore
    from watchkeeper.store.incidents import IncidentStore
    from watchkeeper.store.outbox import OutboxStore
    from watchkeeper.store.pacing import PacingStore
    from watchkeeper.store.runs import PushRunStore
    from watchkeeper.store.sessions import WebSessionStore
    from watchkeeper.store.silences import AckStore, SilenceStore
    from watchkeeper.store.tokens import TokenStore

__all__ = ["Store"]

#: Where each name this package used to import eagerly lives. A command that starts a
#: process needs one aggregate, not all of them (nor the PostgreSQL driver some pull in),
#: so each module is imported when its name is first asked for.
_HOMES = {
    "ClusterStore": "cluster",
    "DecisionStore": "decisions",
    "HeartbeatStore": "heartbeats",
    "IncidentStore": "incidents",
    "OutboxStore": "outbox",
    "PacingStore": "pacing",
    "PushRunStore": "runs",
    "WebSessionStore": "sessions",
    "AckStore": "silences",
    "SilenceStore": "silences",
    "TokenStore": "tokens",
    "is_sqlite": "engine",
    "make_engine": "engine",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)


# A name, not the class: importing the base loads SQLAlchemy, which ``store.lite`` avoids.
A = TypeVar("A", bound="Accessor")


class _Aggregate(Generic[A]):
    """One aggregate's accessor on a :class:`Store`, built on first use and kept."""

    def __init__(self, accessor: str, doc: str) -> None:
        # Named, not imported: the module is loaded by the first store that uses it.
        self._accessor = accessor
        self.__doc__ = doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name

    @overload
    def __get__(self, store: None, owner: type[Any]) -> _Aggregate[A]: ...
    @overload
    def __get__(self, store: Store, owner: type[Any]) -> A: ...
    def __get__(self, store: Store | None, owner: type[Any]) -> _Aggregate[A] | A:
        if store is None:
            return self
        # Kept in the instance's dict, which attribute lookup reads before this descriptor.
        made: A = __getattr__(self._accessor)(store.engine)
        store.__dict__[self._name] = made
        return made


class Store:
    """One database: its engine and one accessor per aggregate."""

    runs: _Aggregate[PushRunStore] = _Aggregate("PushRunStore", "Push runs.")
    incidents: _Aggregate[IncidentStore] = _Aggregate(
        "IncidentStore", "Incidents and their history."
    )
    decisions: _Aggregate[DecisionStore] = _Aggregate(
        "DecisionStore", "Decisions, presses, the action journal and runbook switches."
    )
    outbox: _Aggregate[OutboxStore] = _Aggregate("OutboxStore", "Deliveries and inbound dedup.")
    tokens: _Aggregate[TokenStore] = _Aggregate("TokenStore", "API tokens.")
    web_sessions: _Aggregate[WebSessionStore] = _Aggregate("WebSessionStore", "Dashboard sessions.")
    heartbeats: _Aggregate[HeartbeatStore] = _Aggregate("HeartbeatStore", "Sweep heartbeats.")
    cluster: _Aggregate[ClusterStore] = _Aggregate(
        "ClusterStore", "The leader lease and replica heartbeats."
    )
    pacing: _Aggregate[PacingStore] = _Aggregate(
        "PacingStore", "Per-conversation send slots shared by every replica."
    )
    silences: _Aggregate[SilenceStore] = _Aggregate(
        "SilenceStore", "Silences and the incidents they held back."
    )
    acks: _Aggregate[AckStore] = _Aggregate("AckStore", "Who is looking at which incident.")

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        from watchkeeper.store.engine import make_engine

        self.url = url
        self.engine: Engine = make_engine(url)
        if migrate:
            from watchkeeper.store.migrate import upgrade

            upgrade(self.engine)

    @property
    def is_sqlite(self) -> bool:
        """Whether this store is the embedded SQLite one."""
        from watchkeeper.store.engine import is_sqlite

        return is_sqlite(self.engine)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()
