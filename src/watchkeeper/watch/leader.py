"""Which replica runs the singleton loops: a renewed lease with an epoch, and the fence it gives.

Every replica beats its heartbeat and tries the lease on each tick (half a
check interval). The holder renews it for one and a half check intervals, so
when a leader dies another replica takes over within two check intervals;
a clean shutdown gives the lease up at once. Writes made under
:meth:`Leadership.fence` are refused once the epoch moved on (see
``store.fencing``), so a leader paused past its lease writes nothing after it
resumes.

A replica that cannot reach the database keeps what it believed: nobody else
can take the lease while the database is away, and the believed leader is
the one that tells operators supervision is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from watchkeeper.clock import Now
from watchkeeper.errors import StoreError
from watchkeeper.store import Store
from watchkeeper.store.cluster import Member
from watchkeeper.store.fencing import Fence

log = logging.getLogger(__name__)
#: A lease outlives its last renewal by this many check intervals.
LEASE_INTERVALS = 1.5
#: Replicas beat and try the lease this many times per check interval.
TICKS_PER_INTERVAL = 2
#: Heartbeat rows silent this many lease lengths are deleted (they only feed the listing).
FORGET_AFTER_LEASES = 20


def replica_name() -> str:
    """A name for this process that no other process, now or later, shares."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Leadership:
    """This replica's view of the leader lease, kept current by :meth:`run`.

    ``sole`` (the embedded SQLite database) makes the newest process take the
    lease at its first tick instead of waiting for the old one to lapse: one
    file has one serving process, and a restart must not wait out a dead one.
    """

    def __init__(
        self,
        store: Store,
        *,
        check_interval_s: float,
        clock: Now,
        sole: bool,
        version: str,
        replica: str | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.sole = sole
        self.version = version
        self.replica = replica or replica_name()
        self.ttl = timedelta(seconds=check_interval_s * LEASE_INTERVALS)
        self.tick_every_s = max(0.05, check_interval_s / TICKS_PER_INTERVAL)
        self.started_at = clock()
        self.epoch: int | None = None
        #: When a tick last reached the database; ``None`` before the first.
        self.reached_at: datetime | None = None
        #: The first tick that reached the database after it was away (or at start).
        self.reachable_since: datetime | None = None
        #: Called with the new state whenever this replica starts or stops leading.
        self.on_change: list[Callable[[bool], object]] = []
        self._ticks = 0

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the lease, as of its latest tick."""
        return self.epoch is not None

    @property
    def fence(self) -> Fence | None:
        """The fence for a singleton pass started now, or ``None`` when not leading."""
        return None if self.epoch is None else Fence(self.replica, self.epoch)

    @property
    def live_within(self) -> timedelta:
        """A replica whose heartbeat is older than this is gone."""
        return self.ttl

    def settled(self, now: datetime) -> bool:
        """Whether the database has answered this replica for two ticks in a row by ``now``.

        By then every live replica has beaten again, so a stale heartbeat means
        a replica that is gone, not one that could not reach the database.
        """
        since = self.reachable_since
        return since is not None and (now - since).total_seconds() >= 2 * self.tick_every_s

    def tick(self) -> bool:
        """Beat, then renew the lease or try to take it; whether this replica leads now."""
        now = self.clock()
        cluster = self.store.cluster
        cluster.beat(
            Member(
                self.replica, socket.gethostname(), os.getpid(), self.version, self.started_at, now
            )
        )
        before = self.epoch
        if self.epoch is not None and not cluster.renew(self.replica, self.epoch, now, self.ttl):
            self.epoch = None
        if self.epoch is None:
            force = self.sole and self._ticks == 0
            self.epoch = cluster.take(self.replica, now, self.ttl, force=force)
        self._ticks += 1
        if self.reachable_since is None:
            self.reachable_since = now
        self.reached_at = now
        if self._ticks % 50 == 1:
            cluster.forget_gone(now, self.ttl * FORGET_AFTER_LEASES)
        if before != self.epoch:
            self._changed(before)
        return self.is_leader

    def refused(self, fence: Fence) -> None:
        """A write under ``fence`` was refused: that epoch is over, whatever the last tick said."""
        if self.epoch == fence.epoch:
            before, self.epoch = self.epoch, None
            self._changed(before)

    def _changed(self, before: int | None) -> None:
        if self.epoch is not None:
            log.info(
                "Replica %s leads, epoch %d", self.replica, self.epoch, extra={"action": "leader"}
            )
        else:
            log.info(
                "Replica %s no longer leads (epoch %s ended)",
                self.replica,
                before,
                extra={"action": "leader"},
            )
        for callback in self.on_change:
            try:
                callback(self.is_leader)
            except Exception:  # a listener's bug must not stop the lease
                log.exception("Leadership listener failed", extra={"action": "leader"})

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop``, then give the lease and the heartbeat up at once."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.tick)
            except StoreError as exc:
                self.reachable_since = None
                log.warning("Leader lease tick failed: %s", exc, extra={"action": "leader"})
            except Exception:  # the lease loop must outlive any one tick's bug
                log.exception("Unexpected failure in a lease tick", extra={"action": "leader"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.tick_every_s)
        await asyncio.to_thread(self.step_down)

    def step_down(self) -> None:
        """Give the lease up and leave the member list (a clean shutdown)."""
        now = self.clock()
        epoch, self.epoch = self.epoch, None
        try:
            if epoch is not None:
                self.store.cluster.release(self.replica, epoch, now)
            self.store.cluster.leave(self.replica)
        except StoreError as exc:
            log.warning("Could not give the leader lease up: %s", exc, extra={"action": "leader"})
        if epoch is not None:
            self._changed(epoch)
