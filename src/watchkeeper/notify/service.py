"""The notifier: routes incident events into the outbox and delivers it, in the server's loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime

from watchkeeper.clock import Now
from watchkeeper.config import KindConfig, OpsConfig
from watchkeeper.decide.decider import Decider
from watchkeeper.errors import LeadershipLost, StoreError
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.notify.router import Router, parse_place
from watchkeeper.store import Store
from watchkeeper.store.fencing import fenced
from watchkeeper.watch.leader import Leadership

log = logging.getLogger(__name__)
#: How often the outbox is looked at when nothing pokes it.
PASS_INTERVAL_S = 1.0
#: Due rows one delivery pass takes at most.
PASS_LIMIT = 200


class Notifier:
    """Tells people once: route new incident events, then send what is due."""

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        *,
        decider: Decider,
        ops: OpsConfig,
        kinds: Mapping[str, KindConfig],
        clock: Now,
        leadership: Leadership | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        #: Routing is a singleton loop: only the lease holder routes, fenced by its epoch.
        self.leadership = leadership
        self.channels = dict(channels)
        self.router = Router(store, decider, ops, kinds, list(self.channels))
        claimer = leadership.replica if leadership is not None else None
        self.deliverer = Deliverer(store, self.channels, clock, claimer=claimer)
        #: Due rows one pass of :meth:`run` takes, and how long it waits between passes.
        self.pass_limit = PASS_LIMIT
        self.pass_interval_s = PASS_INTERVAL_S
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def recover(self, now: datetime) -> list[int]:
        """Sends cut off by a crash: sent again if their call never started (or the platform
        recognises a resend), else ``maybe_sent``; returns the ids made ``maybe_sent``.

        Only sends whose replica is gone (its heartbeat lapsed) are taken: a
        replica restarting never touches a live replica's sends in flight.
        """
        leadership = self.leadership
        if leadership is None:
            return self.deliverer.recover_orphaned(now, set())
        live = self.store.cluster.live(now, leadership.live_within) | {leadership.replica}
        return self.deliverer.recover_orphaned(now, live)

    def route(self, now: datetime) -> int:
        """Turn every new incident event into deliveries, and announce the silences that
        ended; returns how many deliveries were queued."""
        total = 0
        while True:
            created = self.router.route(now)
            total += created
            if created == 0 and not self._more_events():
                break
        # After the events: what a silence held back up to its end is named in its announcement.
        ops = [parse_place(entry) for entry in self.router.ops.channels]
        return total + self.router.silences.announce_ended(now, self.router.targets, ops)

    def _more_events(self) -> bool:
        return bool(self.store.incidents.unrouted(1))

    async def deliver_due(self, limit: int = PASS_LIMIT) -> int:
        """Send due deliveries (at most ``limit``); returns how many calls were made."""
        return await self.deliverer.deliver_due(limit)

    def poke(self, *_: object) -> None:
        """Something new to tell: run a pass now. Safe from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    async def run(self, stop: asyncio.Event) -> None:
        """Route and deliver until ``stop``; a failing pass is logged and retried."""
        self._loop = asyncio.get_running_loop()
        while not stop.is_set():
            calls = 0
            try:
                await self._route_if_leading()
                calls = await self.deliver_due(self.pass_limit)
            except StoreError as exc:
                log.warning("Notifier pass failed: %s", exc, extra={"action": "notify"})
            except Exception:  # the notifier must outlive any one pass's bug
                log.exception("Unexpected failure in a notifier pass", extra={"action": "notify"})
            if calls >= self.pass_limit:
                # More may be due already. Every row a pass took is settled or put off, so
                # the next pass finds only rows it has not seen: this never spins on them.
                continue
            self._wake.clear()
            waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())}
            _, pending = await asyncio.wait(
                waiters, timeout=self.pass_interval_s, return_when=asyncio.FIRST_COMPLETED
            )
            for waiter in pending:
                waiter.cancel()

    async def _route_if_leading(self) -> None:
        leadership = self.leadership
        if leadership is None:
            await asyncio.to_thread(self.route, self.clock())
            return
        fence = leadership.fence
        if fence is None:
            return
        try:
            with fenced(fence):
                await asyncio.to_thread(self.route, self.clock())
                now = self.clock()
                if leadership.settled(now):  # every live replica has beaten since the db answered
                    await asyncio.to_thread(self.recover, now)
        except LeadershipLost as exc:
            log.info("Routing stopped: %s", exc, extra={"action": "notify"})
            leadership.refused(fence)

    async def aclose(self) -> None:
        """Close every channel's connections."""
        for channel in self.channels.values():
            await channel.aclose()
