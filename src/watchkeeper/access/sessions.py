"""Dashboard sessions: opened by a token, ended by logout, revocation, idleness or age.

The store keeps the rows (:mod:`watchkeeper.store.sessions`); this service
owns the time rules and the short cache in front of the store. Lookups are
kept in this process for :data:`CACHE_S` on the service's clock: logging out
here forgets the session at once; another replica, or a token revoked from the
command line, is seen within that time.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta

from watchkeeper.clock import Now
from watchkeeper.store import Store
from watchkeeper.store.sessions import WebSession
from watchkeeper.store.tokens import TokenInfo

__all__ = ["CACHE_S", "IDLE_S", "SESSION_S", "TOUCH_EVERY_S", "SessionService", "WebSession"]

#: A session's absolute lifetime: it ends this long after login, however busy.
SESSION_S = 12 * 3600
#: A session not used for this long ends (the idle timeout).
IDLE_S = 2 * 3600
#: Use is written down at most this often per session (the idle timeout is this coarse).
TOUCH_EVERY_S = 60.0
#: How long a looked-up session is trusted in this process: a session logged out on
#: another replica, or a token revoked elsewhere, still works here for at most this long.
CACHE_S = 5.0
#: Most sessions kept in one process's cache; past it, the cache starts afresh.
MAX_CACHED = 4096


class SessionService:
    """Opens, finds (through a short cache), touches and ends dashboard sessions.

    Every method may read or write the store: call them from a worker thread.
    """

    def __init__(self, store: Store, clock: Now) -> None:
        self._sessions = store.web_sessions
        self.clock = clock
        self._kept: dict[str, tuple[datetime, WebSession | None]] = {}
        self._lock = threading.Lock()

    def open(self, token: TokenInfo) -> tuple[str, datetime]:
        """A new session for ``token``: its id (never stored) and when it expires.

        Sessions that have ended are pruned first, so the table holds only live
        ones and those not yet noticed.
        """
        now = self.clock()
        self._sessions.prune(now, now - timedelta(seconds=IDLE_S))
        expires_at = now + timedelta(seconds=SESSION_S)
        return self._sessions.open(token.id, now, expires_at), expires_at

    def find(self, session_id: str) -> WebSession | None:
        """The live session named ``session_id``, recording its use now and then."""
        now = self.clock()
        found = self._read(session_id, now)
        if found is None or _ended(found, now):
            return None
        if (now - found.last_seen_at).total_seconds() >= TOUCH_EVERY_S:
            self._sessions.touch(session_id, now)
            found = dataclasses.replace(found, last_seen_at=now)
            with self._lock:
                kept = self._kept.get(session_id)
                if kept is not None and kept[1] is not None:
                    self._kept[session_id] = (kept[0], found)
        return found

    def close(self, session_id: str) -> None:
        """End the session on the server; this process forgets it at once."""
        self._sessions.revoke(session_id, self.clock())
        self.forget(session_id)

    def forget(self, session_id: str | None = None) -> None:
        """Read ``session_id`` (or every session) from the store on its next use."""
        with self._lock:
            if session_id is None:
                self._kept.clear()
            else:
                self._kept.pop(session_id, None)

    def _read(self, session_id: str, now: datetime) -> WebSession | None:
        with self._lock:
            kept = self._kept.get(session_id)
        # A clock that went back makes an entry stale too, so it never lives longer.
        if kept is not None and 0 <= (now - kept[0]).total_seconds() < CACHE_S:
            return kept[1]
        found = self._sessions.find(session_id)
        with self._lock:
            if len(self._kept) >= MAX_CACHED:
                self._kept.clear()
            self._kept[session_id] = (now, found)
        return found


def _ended(found: WebSession, now: datetime) -> bool:
    return now >= found.expires_at or (now - found.last_seen_at).total_seconds() >= IDLE_S
