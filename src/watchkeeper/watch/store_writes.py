"""Does the store take writes? Every write it refuses is seen here, whichever code made it.

A full disk, a read-only database file or a database that stopped taking
writes lets reads through: pages and ``GET`` requests answer as usual while every
report, press, lease renewal and sweep fails. One failed sweep says little (the
next may get a write through into space already allocated), so health does not
ask the sweeps: it counts each refusal where it happens, in the engine's error
hook, and holds "the store refuses writes" until writes have gone through for a
while without one being refused.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from watchkeeper.clock import Now
from watchkeeper.redact import redact

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.engine import ExceptionContext

#: Statements that write: one of these failing on the database's side is a refused write.
WRITE_WORDS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT", "BEGIN IMMEDIATE")
#: PostgreSQL's class of transactions rolled back for contention (deadlock, serialization).
ROLLED_BACK = "40"
#: The most of the database's own message a detail quotes.
MAX_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class Refusals:
    """A spell of refused writes: when it began, the latest one, how many and why."""

    since: datetime
    last_at: datetime
    count: int
    error: str


def refuses_a_write(context: ExceptionContext) -> bool:
    """Whether the failure ``context`` describes is the database refusing a write.

    Only the database's own operational failures count (a full disk, a read-only
    file, an I/O error, a lock never released, a lost server), never what the
    application asked wrongly (a constraint or a value refused) nor a transaction
    rolled back for contention: those say nothing about the store. A failed commit
    is a write; so is any statement of a transaction opened to write (SQLite's
    ``BEGIN IMMEDIATE``).
    """
    if context.is_pre_ping or not isinstance(context.sqlalchemy_exception, OperationalError):
        return False
    sqlstate = getattr(context.original_exception, "sqlstate", None) or ""
    if sqlstate.startswith(ROLLED_BACK):  # contention the caller retries, not a refusal
        return False
    if context.statement is None:  # the commit (or the rollback after it) failed
        return True
    connection = context.connection
    if connection is not None and connection.get_execution_options().get("sqlite_begin"):
        return True
    return context.statement.lstrip().upper().startswith(WRITE_WORDS)


def _message(exc: BaseException) -> str:
    # Shown on an endpoint anyone may read: one line, short, no secret of a database URL.
    text = redact(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


class StoreWrites:
    """Counts the writes the store refused, on the injected clock, from any thread."""

    def __init__(self, clock: Now) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._refusals: Refusals | None = None
        self._engine: Engine | None = None

    def watch(self, engine: Engine) -> None:
        """See every refused write ``engine`` makes from now on (until :meth:`unwatch`)."""
        if self._engine is None:
            event.listen(engine, "handle_error", self._failed)
            self._engine = engine

    def unwatch(self) -> None:
        """Stop seeing the engine's failures."""
        if self._engine is not None:
            event.remove(self._engine, "handle_error", self._failed)
            self._engine = None

    def _failed(self, context: ExceptionContext) -> None:
        if refuses_a_write(context):
            self.refused(_message(context.original_exception))

    def refused(self, error: str) -> None:
        """A write was refused now, for ``error``."""
        now = self.clock()
        with self._lock:
            spell = self._refusals
            if spell is None:
                self._refusals = Refusals(now, now, 1, error)
            else:
                self._refusals = Refusals(
                    spell.since, max(now, spell.last_at), spell.count + 1, error
                )

    def refusing(self, quiet: timedelta) -> Refusals | None:
        """The spell of refusals going on, or ``None`` once no write has been refused for
        ``quiet`` (a refusal after that starts a new spell)."""
        now = self.clock()
        with self._lock:
            spell = self._refusals
            if spell is not None and now - spell.last_at >= quiet:
                self._refusals = spell = None
            return spell
