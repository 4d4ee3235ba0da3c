"""Persistence through SQLAlchemy Core on SQLite or PostgreSQL. No business rules here.

Only this package imports SQLAlchemy; everything above it sees frozen records
and watchkeeper's own errors.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from watchkeeper.store.decisions import DecisionStore
from watchkeeper.store.engine import is_sqlite, make_engine
from watchkeeper.store.heartbeats import HeartbeatStore
from watchkeeper.store.incidents import IncidentStore
from watchkeeper.store.runs import PushRunStore
from watchkeeper.store.tokens import TokenStore

if TYPE_CHECKING:
    from watchkeeper.store.outbox import OutboxStore
    from watchkeeper.store.sessions import WebSessionStore

__all__ = ["Store"]


class Store:
    """One database: its engine and one accessor per aggregate."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.engine: Engine = make_engine(url)
        if migrate:
            from watchkeeper.store.migrate import upgrade

            upgrade(self.engine)

    @property
    def is_sqlite(self) -> bool:
        """Whether this store is the embedded SQLite one."""
        return is_sqlite(self.engine)

    @cached_property
    def runs(self) -> PushRunStore:
        """Push runs."""
        return PushRunStore(self.engine)

    @cached_property
    def incidents(self) -> IncidentStore:
        """Incidents and their history."""
        return IncidentStore(self.engine)

    @cached_property
    def decisions(self) -> DecisionStore:
        """Decisions, presses, the action journal and runbook switches."""
        return DecisionStore(self.engine)

    @cached_property
    def outbox(self) -> OutboxStore:
        """Deliveries and inbound dedup."""
        from watchkeeper.store.outbox import OutboxStore

        return OutboxStore(self.engine)

    @cached_property
    def tokens(self) -> TokenStore:
        """API tokens."""
        return TokenStore(self.engine)

    @cached_property
    def web_sessions(self) -> WebSessionStore:
        """Dashboard sessions."""
        from watchkeeper.store.sessions import WebSessionStore

        return WebSessionStore(self.engine)

    @cached_property
    def heartbeats(self) -> HeartbeatStore:
        """Sweep heartbeats."""
        return HeartbeatStore(self.engine)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()
