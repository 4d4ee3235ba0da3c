"""One read of every kind, shared by the pages and live refreshes that ask at the same moment."""

from __future__ import annotations

import asyncio

from fastapi import Request

from watchkeeper.server.deps import Services, made_once
from watchkeeper.watch.overview import Overview

#: How long one read of every kind serves every page that asks.
OVERVIEW_TTL_S = 2.0
#: The same while the stream watches the store: it forgets the read as soon as it sees
#: anything move (a report, a task, an incident, a sweep), so it may be kept longer.
WATCHED_TTL_S = 15.0


class SharedOverview:
    """One read of every kind, shared by every page and live refresh that ask at the same moment.

    Reading every kind is the costly part of a page (at 10,000 queued jobs,
    the task kind alone takes most of a second): viewers and refreshes that
    ask within the same moment wait for one read instead of starting their own.
    """

    def __init__(self) -> None:
        self._locks: dict[bool, asyncio.Lock] = {}
        self._kept: dict[bool, tuple[float, Overview]] = {}
        self._generation = 0
        #: Set by the stream's watcher while it looks once a second.
        self.watched = False

    async def get(self, found: Services, show_all: bool) -> Overview:
        """A fresh enough overview, read now only when the kept one is too old."""
        loop = asyncio.get_running_loop()
        async with self._locks.setdefault(show_all, asyncio.Lock()):
            kept = self._kept.get(show_all)
            ttl = WATCHED_TTL_S if self.watched else OVERVIEW_TTL_S
            if kept is not None and loop.time() - kept[0] < ttl:
                return kept[1]
            generation = self._generation
            overview = await found.overview(include_finished=show_all)
            if generation == self._generation:  # nothing moved while it was read
                self._kept[show_all] = (loop.time(), overview)
            return overview

    def forget(self) -> None:
        """Something moved: the next page reads again."""
        self._generation += 1
        self._kept.clear()


def shared_overview(request: Request) -> SharedOverview:
    """The app's shared overview, made on first use."""
    return made_once(request.app, "web_overview", SharedOverview, SharedOverview)
