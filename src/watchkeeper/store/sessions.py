"""Dashboard sessions, kept on the server: one row per login, found by the hash of its id.

The store keeps the rows and answers which are live in the data's own terms
(not revoked, and opened by a token that is not revoked); the time rules (idle
timeout, lifetime) belong to the dashboard, which passes its cut-offs in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import ColumnElement, delete, insert, or_, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.schema import api_tokens
from watchkeeper.store.schema.web import web_sessions


@dataclass(frozen=True, slots=True)
class WebSession:
    """A live session row with the name and role of the token it was opened with."""

    session_id: str = field(repr=False)
    token_id: int
    name: str
    role: str
    csrf: str = field(repr=False)
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime


_SESSION_TIMES = ("created_at", "last_seen_at", "expires_at")


def hash_session_id(session_id: str) -> str:
    """The stored form of a session id (ids are random, so a plain hash suffices)."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class WebSessionStore(Accessor):
    """Opens, finds, touches, revokes and prunes dashboard sessions."""

    def open(self, token_id: int, now: datetime, expires_at: datetime) -> str:
        """Record a new session for ``token_id``; returns its id, which is never stored."""
        session_id = secrets.token_urlsafe(32)
        at = to_epoch(now)
        values = {
            "id_hash": hash_session_id(session_id),
            "token_id": token_id,
            "csrf": secrets.token_urlsafe(24),
            "created_at": at,
            "last_seen_at": at,
            "expires_at": to_epoch(expires_at),
        }
        with self._write("opening a dashboard session") as c:
            c.execute(insert(web_sessions).values(**values))
        return session_id

    def find(self, session_id: str) -> WebSession | None:
        """The session, unless it was revoked or its token was (times are the caller's rule)."""
        statement = (
            select(web_sessions, api_tokens.c.name, api_tokens.c.role)
            .join(api_tokens, api_tokens.c.id == web_sessions.c.token_id)
            .where(
                web_sessions.c.id_hash == hash_session_id(session_id),
                web_sessions.c.revoked_at.is_(None),
                api_tokens.c.revoked_at.is_(None),
            )
        )
        with self._read("reading a dashboard session") as conn:
            row = conn.execute(statement).first()
        if row is None:
            return None
        return record_from_row(WebSession, row, times=_SESSION_TIMES, session_id=session_id)

    def touch(self, session_id: str, now: datetime) -> None:
        """Record that the session was used at ``now`` (it only moves forward)."""
        at = to_epoch(now)
        seen = web_sessions.c.last_seen_at < at
        self._move_live("touching a dashboard session", session_id, seen, last_seen_at=at)

    def revoke(self, session_id: str, now: datetime) -> None:
        """End the session; revoking twice is harmless."""
        self._move_live("ending a dashboard session", session_id, revoked_at=to_epoch(now))

    def _move_live(
        self, action: str, session_id: str, *where: ColumnElement[bool], **values: float
    ) -> None:
        """Apply ``values`` to the session if it is not revoked (and ``where`` holds)."""
        statement = (
            update(web_sessions)
            .where(
                web_sessions.c.id_hash == hash_session_id(session_id),
                web_sessions.c.revoked_at.is_(None),
                *where,
            )
            .values(**values)
        )
        with self._write(action) as c:
            c.execute(statement)

    def prune(self, now: datetime, idle_since: datetime) -> int:
        """Delete sessions that have ended: expired, idle since before ``idle_since``,
        revoked, or opened by a revoked token. Returns how many went."""
        revoked_tokens = select(api_tokens.c.id).where(api_tokens.c.revoked_at.is_not(None))
        ended = or_(
            web_sessions.c.expires_at <= to_epoch(now),
            web_sessions.c.last_seen_at < to_epoch(idle_since),
            web_sessions.c.revoked_at.is_not(None),
            web_sessions.c.token_id.in_(revoked_tokens),
        )
        with self._write("pruning dashboard sessions") as c:
            return int(c.execute(delete(web_sessions).where(ended)).rowcount)
