"""The sweep loop: read every kind, judge, move incidents through their lifecycle, check itself."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from watchkeeper.clock import Now, utcnow
from watchkeeper.contract import KindRead, KindSpec
from watchkeeper.errors import LeadershipLost, StoreError
from watchkeeper.judge import next_deadline
from watchkeeper.kinds.base import Adapter
from watchkeeper.store import Store
from watchkeeper.store.fencing import fenced
from watchkeeper.store.heartbeats import SweepBeat
from watchkeeper.store.incidents import Applied, Incident
from watchkeeper.watch.leader import Leadership
from watchkeeper.watch.lifecycle import Judged, judge_reads, plan
from watchkeeper.watch.metrics import SweepMetrics
from watchkeeper.watch.overview import Overview, build
from watchkeeper.watch.results import SweepResult
from watchkeeper.watch.selfcheck import Notice, NoticeSink, SupervisionHealth

log = logging.getLogger(__name__)
# Judge a budget that ran out a hair after it did, so "older than the budget" holds.
DEADLINE_SLACK = timedelta(milliseconds=20)
# Reports can poke the loop many times a second; sweeps still leave this much room between them.
MIN_SWEEP_GAP = timedelta(seconds=1)


class Sweeper:
    """Runs sweeps on a schedule and keeps the latest result for the API."""

    def __init__(
        self,
        store: Store,
        adapters: Mapping[str, Adapter],
        *,
        check_interval_s: float,
        down_after_s: float,
        notifier: NoticeSink,
        clock: Now = utcnow,
        metrics: SweepMetrics | None = None,
        replica: str | None = None,
        leadership: Leadership | None = None,
    ) -> None:
        self.store = store
        self.adapters = dict(adapters)
        self.specs: dict[str, KindSpec] = {name: a.spec for name, a in adapters.items()}
        self.check_interval_s = check_interval_s
        self.health = SupervisionHealth(down_after_s)
        self.notifier = notifier
        self.clock = clock
        self.metrics = metrics or SweepMetrics()
        #: The lease that decides whether this replica sweeps; ``None``: always (a lone process).
        self.leadership = leadership
        self.replica = replica or (
            leadership.replica if leadership else f"{socket.gethostname()}:{id(self):x}"
        )
        self.latest: SweepResult | None = None
        self._wake_at: datetime | None = None
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Work the leader does on every sweep before reading (cold starts, say).
        self.sweep_hooks: list[Callable[[datetime], object]] = []
        #: Work every replica does on every tick, leader or not (reaping its own processes).
        self.local_hooks: list[Callable[[datetime], object]] = []
        #: Tells the leader about a deadline a report brought to this follower (``None``: alone).
        self.relay_deadline: Callable[[datetime], object] | None = None
        self._relayed: datetime | None = None
        self._relay_lock = threading.Lock()
        #: Work done after incidents are recorded (runbooks, say); gets the sweep's result.
        self.after_sweep: list[Callable[[SweepResult], object]] = []
        #: When each kind was last read in this process, so work of a kind that cannot be
        #: read now is listed with when it was last seen.
        self.last_read: dict[str, datetime] = {}

    def _note_reads(self, reads: Sequence[KindRead], now: datetime) -> None:
        for read in reads:
            earlier = self.last_read.get(read.kind)
            # A page's read and a sweep's may finish out of order: keep the latest.
            if read.readable and (earlier is None or now > earlier):
                self.last_read[read.kind] = now

    async def read_all(self, now: datetime) -> tuple[KindRead, ...]:
        """Read every run of every kind concurrently, each within its own time limit."""
        reads = await asyncio.gather(*(a.read_contained(now) for a in self.adapters.values()))
        self._note_reads(reads, now)
        return tuple(reads)

    async def overview(self, include_finished: bool) -> Overview:
        """Read every kind now and sort what it reports (does not touch incidents)."""
        now = self.clock()
        reads = await self.read_all(now)
        judged = judge_reads(reads, self.specs, now)
        # Every kind's incidents: those of a kind that cannot be read still need attention.
        live = self.store.incidents.live(list(self.adapters))
        suppressed = self.store.decisions.suppressed_keys(list(judged))
        return build(reads, judged, live, now, include_finished, suppressed, self.last_read)

    async def overview_of_run(self, kind: str, run_id: str) -> Overview:
        """The runs list, finished work included, narrowed to one run and read from it alone:
        its row, its live incidents and its dismissals, whatever the number of runs.

        A kind that cannot be read lists the run as its open incident last saw it, as the
        whole list does; a kind not configured reads as the whole list would (no run).
        """
        adapter = self.adapters.get(kind)
        if adapter is None:
            return build((), {}, (), self.clock(), include_finished=True)
        now = self.clock()
        read = await adapter.read_one_contained(run_id, now)
        self._note_reads((read,), now)
        judged = judge_reads((read,), self.specs, now)
        live = await asyncio.to_thread(self.store.incidents.live_for_run, kind, run_id)
        suppressed = await asyncio.to_thread(self.store.decisions.suppressed_keys, [kind], run_id)
        return build((read,), judged, live, now, True, suppressed, self.last_read)

    def last_known(self) -> Overview | None:
        """What the last good sweep of this process saw, for when the store cannot be read.

        Without the store there are no incidents to sort by: every paged
        verdict of that sweep is listed as needing attention.
        """
        latest = self.latest
        if latest is None:
            return None
        return build(latest.reads, latest.judged, (), latest.at, include_finished=False)

    async def read_for_sweep(self, now: datetime, live: Sequence[Incident]) -> tuple[KindRead, ...]:
        watched: dict[str, set[str]] = {name: set() for name in self.adapters}
        for incident in live:
            watched.setdefault(incident.key.kind, set()).add(incident.key.run_id)
        reads = await asyncio.gather(
            *(a.read_contained(now, watched[name]) for name, a in self.adapters.items())
        )
        self._note_reads(reads, now)
        return tuple(reads)

    async def sweep(self) -> SweepResult:
        """One sweep. Never raises for a store outage: it is recorded and announced."""
        started = time.perf_counter()
        now = self.clock()
        await self._run_hooks([*self.local_hooks, *self.sweep_hooks], now)
        reads: tuple[KindRead, ...] = ()
        try:
            live = await asyncio.to_thread(self.store.incidents.live, list(self.adapters))
            reads = await self.read_for_sweep(now, live)
            judged, applied, deadline = await asyncio.to_thread(
                self._judge_and_record, reads, live, now
            )
        except StoreError as exc:
            result = SweepResult(
                now, reads, {}, duration_s=time.perf_counter() - started, error=str(exc)
            )
            await self._after_failure(result)
            return result
        result = SweepResult(now, reads, judged, applied, deadline, time.perf_counter() - started)
        await self._after_success(result)
        await self._run_hooks(self.after_sweep, result)
        return result

    async def _run_hooks(self, hooks: Sequence[Callable[[Any], object]], argument: object) -> None:
        for hook in hooks:
            try:
                await asyncio.to_thread(hook, argument)
            except Exception:  # one hook's failure must not stop supervision
                log.exception("Sweep hook %r failed", hook, extra={"action": "sweep_hook"})

    def _judge_and_record(
        self, reads: tuple[KindRead, ...], live: Sequence[Incident], now: datetime
    ) -> tuple[dict[str, list[Judged]], Applied, datetime | None]:
        judged = judge_reads(reads, self.specs, now)
        readable_live = [i for i in live if i.key.kind in judged]
        changes = plan(judged, readable_live, self.store.decisions.suppressed_keys(list(judged)))
        applied = self.store.incidents.apply(changes, now) if changes else Applied()
        runs = sum(read.considered for read in reads if read.readable)
        unreadable = [f"{r.kind}: {r.error}" for r in reads if not r.readable]
        self.store.heartbeats.beat(
            SweepBeat(self.replica, now, now, 0.0, runs, "; ".join(unreadable) or None)
        )
        return judged, applied, self.earliest(reads, judged, now)

    def earliest(
        self, reads: Sequence[KindRead], judged: Mapping[str, Sequence[Judged]], now: datetime
    ) -> datetime | None:
        """The earliest future moment any verdict could change, over shown and summarised runs."""
        moments = [read.deadline for read in reads if read.readable and read.deadline is not None]
        for kind, items in judged.items():
            spec = self.specs[kind]
            for item in items:
                deadline = next_deadline(item.run, spec, now)
                if deadline is not None:
                    moments.append(deadline)
        future = [moment for moment in moments if moment > now]
        return min(future) if future else None

    async def _after_success(self, result: SweepResult) -> None:
        self.latest = result
        self.metrics.observe(result.reads, result.judged)
        self.metrics.sweeps.labels("ok").inc()
        self.metrics.sweep_duration.observe(result.duration_s)
        self.metrics.supervision_working.set(1)
        await self._announce(self.health.succeeded(result.at))

    async def _after_failure(self, result: SweepResult) -> None:
        log.warning("Sweep failed: %s", result.error, extra={"action": "sweep"})
        self.metrics.sweeps.labels("failed").inc()
        self.metrics.supervision_working.set(0)
        await self._announce(self.health.failed(result.at, result.error or "unknown error"))

    async def _announce(self, notice: Notice | None) -> None:
        if notice is not None:
            await self.notifier.send(notice)

    def poke(self, deadline: datetime) -> None:
        """Tell the loop about a new deadline (a run just started); safe from any thread.

        On a follower the deadline is also relayed (``relay_deadline``) to the
        leader, which is the one that sweeps; a deadline later than one already
        relayed and still ahead is not sent again.
        """
        leadership = self.leadership
        if self.relay_deadline is not None and leadership is not None and not leadership.is_leader:
            self._relay(deadline)
        self.wake_for(deadline)

    def _relay(self, deadline: datetime) -> None:
        assert self.relay_deadline is not None
        with self._relay_lock:
            pending = self._relayed
            if pending is not None and self.clock() < pending <= deadline:
                return
            self._relayed = deadline
        try:
            self.relay_deadline(deadline)
        except StoreError as exc:  # a hint only: the leader's own tick still comes
            log.warning(
                "Could not relay a deadline to the leader: %s", exc, extra={"action": "sweep"}
            )

    def wake_for(self, deadline: datetime) -> None:
        """Sweep by ``deadline`` if this replica sweeps; safe from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._lower_wake, deadline)

    def _lower_wake(self, deadline: datetime) -> None:
        wake = deadline + DEADLINE_SLACK
        if self.latest is not None:
            wake = max(wake, self.latest.at + MIN_SWEEP_GAP)
        if self._wake_at is None or wake < self._wake_at:
            self._wake_at = wake
            if self._changed is not None:
                self._changed.set()

    def next_wake(self, result: SweepResult) -> datetime:
        """When to sweep next: the next tick, or sooner when a deadline comes first."""
        tick = result.at + timedelta(seconds=self.check_interval_s)
        if result.next_deadline is not None and result.next_deadline + DEADLINE_SLACK < tick:
            return result.next_deadline + DEADLINE_SLACK
        return tick

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep until ``stop`` is set; a failing sweep is logged and retried next tick."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        # A loop restarted by its supervisor registers once, not once per start.
        if (
            self.leadership is not None
            and self._leadership_changed not in self.leadership.on_change
        ):
            self.leadership.on_change.append(self._leadership_changed)
        while not stop.is_set():
            self._wake_at = None  # a report poked during the sweep leaves its deadline here
            result = await self._pass()
            scheduled, poked = self.next_wake(result), self._wake_at
            self._wake_at = scheduled if poked is None else min(scheduled, poked)
            await self._sleep_until_wake(stop)

    async def _pass(self) -> SweepResult:
        """A sweep when this replica leads, fenced by its lease; else only this host's own work."""
        leadership = self.leadership
        fence = None if leadership is None else leadership.fence
        if leadership is not None and fence is None:
            return await self._follow()
        try:
            with fenced(fence):
                return await self.sweep()
        except LeadershipLost as exc:
            log.info("Sweep stopped: %s", exc, extra={"action": "sweep"})
            if leadership is not None and fence is not None:
                leadership.refused(fence)
        except Exception:
            log.exception("Unexpected failure in a sweep", extra={"action": "sweep"})
        return SweepResult(self.clock(), (), {}, error="unexpected failure")

    async def _follow(self) -> SweepResult:
        now = self.clock()
        await self._run_hooks(self.local_hooks, now)
        reached = self.leadership.reached_at if self.leadership else None
        if self.health.down_announced and reached is not None:
            # The database answers again and another replica sweeps: this replica told people
            # supervision was down, so it is the one to tell them it works again.
            await self._announce(self.health.succeeded(now))
        return SweepResult(now, (), {}, error="not the leader")

    def _leadership_changed(self, _leading: bool) -> None:
        # Sweep (or stop sweeping) now rather than at the end of the current wait.
        self.wake_for(self.clock())

    async def _sleep_until_wake(self, stop: asyncio.Event) -> None:
        assert self._changed is not None
        while not stop.is_set():
            assert self._wake_at is not None
            remaining = (self._wake_at - self.clock()).total_seconds()
            if remaining <= 0:
                return
            self._changed.clear()
            waiters = {
                asyncio.ensure_future(stop.wait()),
                asyncio.ensure_future(self._changed.wait()),
            }
            _, pending = await asyncio.wait(
                waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in pending:
                waiter.cancel()

    def close(self) -> None:
        """Release every adapter."""
        for adapter in self.adapters.values():
            adapter.close()
