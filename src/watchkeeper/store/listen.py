"""Wake-ups across replicas: PostgreSQL's LISTEN/NOTIFY, one channel per schema.

A transaction that writes an incident event, or queues deliveries, also
notifies the channel of its schema (PostgreSQL delivers it at commit, and
only then). A :class:`Listener` holds one connection of its own that
listens, and calls its callbacks on every notification, so a loop or a
stream on any replica wakes at once instead of at its next poll. Polling stays: a notification
is a hint, never the only way a change is found. On SQLite there is one
process per file and nothing to listen to; the listener does nothing.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import ConnStatus
from sqlalchemy import Connection, Engine, text

from watchkeeper.backoff import EQUAL_JITTER, backoff_delay
from watchkeeper.store.engine import is_sqlite

log = logging.getLogger(__name__)
#: The channel incident events are announced on, one per schema: channels span the whole
#: database, and deployments that share one in schemas of their own must not wake each other.
#: Hashed, because a channel name is at most 63 bytes and a schema name may be that long.
CHANNEL_SQL = "'watchkeeper_events_' || md5(coalesce(current_schema(), ''))"
#: Reconnecting after a lost connection waits from this long ...
RETRY_INITIAL_S = 0.5
#: ... up to this long.
RETRY_CAP_S = 30.0
#: How long stop() waits for the thread.
STOP_TIMEOUT_S = 5.0
_ANNOUNCED = "watchkeeper_announced_in"
#: A notification whose payload starts so carries a deadline (epoch seconds), not a change.
DEADLINE = "deadline:"


def announce(conn: Connection) -> None:
    """Notify this schema's channel when the transaction on ``conn`` commits (PostgreSQL only).

    Once per transaction: PostgreSQL folds equal notifications of one
    transaction into one anyway, so a second call would only cost a round trip.
    """
    if conn.dialect.name != "postgresql":
        return
    transaction = conn.get_transaction()
    if transaction is not None and conn.info.get(_ANNOUNCED) is transaction:
        return
    conn.info[_ANNOUNCED] = transaction
    conn.execute(text(f"SELECT pg_notify({CHANNEL_SQL}, '')"))


def announce_deadline(engine: Engine, at: float) -> None:
    """Tell every replica's listener about a deadline at ``at`` (epoch seconds; PostgreSQL only).

    A report that lands on a follower calls this, so the leader's sweep loop
    wakes for a deadline it would otherwise learn only at its next tick.
    """
    if is_sqlite(engine):
        return
    with engine.connect() as conn:
        conn.execute(
            text(f"SELECT pg_notify({CHANNEL_SQL}, :payload)"), {"payload": f"{DEADLINE}{at!r}"}
        )
        conn.commit()


class Listener:
    """Calls its callbacks whenever its schema's channel is notified, from a daemon thread.

    The thread keeps one connection of its own; when it drops, the thread
    reconnects with backoff and calls the callbacks once it listens again
    (anything written meanwhile went unannounced). Callbacks run on the
    listener's thread: they must be quick and thread-safe (set an event,
    schedule work on a loop).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._callbacks: list[Callable[[], None]] = []
        self._deadline_callbacks: list[Callable[[float], None]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._backend_pid: int | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)

    def add(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (with no arguments) on every notification."""
        with self._lock:
            self._callbacks.append(callback)

    def add_deadline(self, callback: Callable[[float], None]) -> None:
        """Call ``callback`` with the earliest deadline (epoch seconds) a notification carries."""
        with self._lock:
            self._deadline_callbacks.append(callback)

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection, while it listens."""
        return self._backend_pid

    @property
    def listening(self) -> bool:
        """Whether a connection is listening now."""
        return self._backend_pid is not None

    def start(self) -> None:
        """Start listening (on SQLite: nothing to do)."""
        if is_sqlite(self._engine) or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="watchkeeper-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and close the connection; returns once the thread has ended."""
        self._stopping.set()
        with contextlib.suppress(OSError):  # already closed: a second stop
            self._wake_w.send(b"x")
        thread = self._thread
        if thread is not None:
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive():  # still connecting: it ends on its own, and needs its socket
                return
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                with self._connect() as conn:
                    row = conn.execute(f"SELECT {CHANNEL_SQL}").fetchone()
                    channel = str(row[0]) if row else ""
                    conn.execute(f'LISTEN "{channel}"')
                    attempt = 0
                    self._fire()
                    self._backend_pid = conn.info.backend_pid
                    self._serve(conn)
            except Exception as exc:  # noqa: BLE001 - the thread outlives any failure: it retries
                if not self._stopping.is_set():
                    log.warning(
                        "Listening for database notifications failed: %s; retrying",
                        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc),
                        extra={"action": "listen"},
                    )
            finally:
                self._backend_pid = None
            delay = backoff_delay(
                attempt, initial=RETRY_INITIAL_S, cap=RETRY_CAP_S, jitter=EQUAL_JITTER
            )
            attempt += 1
            self._stopping.wait(delay)

    def _connect(self) -> psycopg.Connection[Any]:
        _, params = self._engine.dialect.create_connect_args(self._engine.url)
        params.pop("context", None)
        # Keepalives make a silently dropped network path end the wait with an error. What the
        # database URL sets itself (an application name, a timeout) wins over these defaults.
        defaults = {
            "application_name": "watchkeeper-listener",
            "connect_timeout": 10,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
        return psycopg.connect(**{**defaults, **params}, autocommit=True)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        pgconn = conn.pgconn
        while not self._stopping.is_set():
            wake = self._wake_r.fileno()
            ready, _, _ = select.select([pgconn.socket, wake], [], [])
            if wake in ready:
                return
            pgconn.consume_input()
            payloads: list[str] = []
            while (notice := pgconn.notifies()) is not None:
                payloads.append(notice.extra.decode(errors="replace"))
            if pgconn.status != ConnStatus.OK:
                raise psycopg.OperationalError("the listening connection was closed")
            if payloads:
                self._fire(payloads)

    def _fire(self, payloads: list[str] | None = None) -> None:
        """Changes wake the plain callbacks (``None``: anything may have changed, call them
        all); deadlines go to the deadline callbacks only."""
        deadlines = [_deadline(p) for p in payloads or () if p.startswith(DEADLINE)]
        changed = payloads is None or len(deadlines) < len(payloads)
        with self._lock:
            callbacks = list(self._callbacks) if changed else []
            on_deadline = list(self._deadline_callbacks)
        calls: list[Callable[[], object]] = list(callbacks)
        known = [at for at in deadlines if at is not None]
        if known:
            earliest = min(known)
            calls.extend(functools.partial(callback, earliest) for callback in on_deadline)
        for call in calls:
            try:
                call()
            except Exception:  # one callback's bug must not silence the others
                log.exception("A notification callback failed", extra={"action": "listen"})


def _deadline(payload: str) -> float | None:
    try:
        return float(payload[len(DEADLINE) :])
    except ValueError:  # not one of ours: a deadline is only a hint
        return None
