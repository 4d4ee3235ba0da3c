"""Each program's life as a run of kind ``program`` in watchkeeper's own store.

The run's id is ``NAME@HOST``: every server that runs the program has a run of
its own, and the run names the host. It starts when the program first starts
and moves on each restart (its step says why); it ends failed when its group
gave up on it (a crash loop: the incident with Restart and Stop), cancelled
when a person or the server stopped it, succeeded when a program that is not
restarted exited normally. What it says is redacted before it is stored. Its
origin is where the program's notices go (:mod:`.routes`): written when it
starts and whenever that place changes, never as a move.

Writes are blocking store calls: the host runs them in a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from watchkeeper.clock import Now, to_epoch
from watchkeeper.contract import RunStatus, fingerprint
from watchkeeper.errors import WatchkeeperError
from watchkeeper.redact import redact
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun

log = logging.getLogger(__name__)

KIND = "program"
#: The fingerprint of a crash loop: one failure, however often it comes back.
CRASH_LOOP = "crash_loop"
#: Programs are judged by their supervisor, never by a lease: this one never lapses.
_LEASE_S = timedelta(days=3650).total_seconds()


def run_id_of(name: str, host: str) -> str:
    """The run id of program ``name`` on ``host``."""
    return f"{name}@{host}"


def name_and_host(run_id: str) -> tuple[str, str]:
    """The program and host a run id names."""
    name, _, host = run_id.rpartition("@")
    return name, host


class ProgramRecords:
    """Starts, moves and ends the runs of this host's programs."""

    def __init__(
        self,
        store: Store,
        host: str,
        clock: Now,
        wake: Callable[[datetime], None],
        origin_of: Callable[[str], dict[str, str] | None] = lambda _name: None,
    ) -> None:
        self.store = store
        self.host = host
        self.clock = clock
        self.wake = wake
        #: Where a program's notices go now, as its run's origin (read when it is written).
        self.origin_of = origin_of
        # A start and a route change write the origin from two threads: the later one read
        # the place last, so it must also write last.
        self._routing = threading.Lock()

    def started(self, name: str, title: str, step: str) -> None:
        """The program runs (a first start, or the next attempt of an ended run)."""
        with self._routing:
            origin = self.origin_of(name)
            run_id = run_id_of(name, self.host)
            new = NewRun(KIND, run_id, redact(title), origin, "unknown", None, None, _LEASE_S)
            try:
                run, _changed = self.store.runs.start(new, self.clock())
            except WatchkeeperError as exc:
                self._failed_write(name, "start", exc)
                return
            if run.origin != origin:  # still running from before: started is idempotent then
                self._route(name, origin)
        self.moved(name, step)

    def routed(self, name: str) -> None:
        """The place the program's notices go changed: its run (if it has one) says so."""
        with self._routing:
            self._route(name, self.origin_of(name))

    def _route(self, name: str, origin: dict[str, str] | None) -> None:
        try:
            self.store.runs.set_origin(KIND, run_id_of(name, self.host), origin)
        except WatchkeeperError as exc:
            self._failed_write(name, "route", exc)

    def moved(self, name: str, step: str) -> None:
        """Something happened to the running program: a restart, a pause, a health check."""
        now = self.clock()
        self._move(name, {"step": redact(step), "progress_at": to_epoch(now)})

    def failed(self, name: str, reason: str, fingerprint_of: str | None = None) -> None:
        """The program is down for good until someone acts: the incident opens."""
        reason = redact(reason)
        values = {
            "failure_reason": reason,
            "failure_fingerprint": fingerprint_of or fingerprint(reason),
            "step": reason,
        }
        self._end(name, RunStatus.FAILED, values)

    def stopped(self, name: str, why: str) -> None:
        """A person or the server stopped it."""
        self._end(name, RunStatus.CANCELLED, {"step": redact(why)})

    def exited(self, name: str, why: str) -> None:
        """It exited normally and is not restarted."""
        self._end(name, RunStatus.SUCCEEDED, {"step": redact(why)})

    def _end(self, name: str, status: RunStatus, values: dict[str, Any]) -> None:
        now = self.clock()
        self._move(name, {**values, "status": status.value, "finished_at": to_epoch(now)})
        self.wake(now)  # an ended run's incident opens or settles at the next sweep: now

    def _move(self, name: str, values: dict[str, Any]) -> None:
        try:
            self.store.runs.move(KIND, run_id_of(name, self.host), self.clock(), values)
        except WatchkeeperError as exc:
            self._failed_write(name, "update", exc)

    def _failed_write(self, name: str, what: str, exc: WatchkeeperError) -> None:
        log.warning(
            "Could not %s the run of program %s: %s",
            what,
            name,
            exc,
            extra={"action": "program_record"},
        )
