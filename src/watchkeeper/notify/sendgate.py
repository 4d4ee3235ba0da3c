"""This replica's own spacing of its calls, kept right before each call goes out.

The store hands out send slots ahead of time; a busy machine (a stalled event
loop, a slow thread) can wake many of them at once, past their moments, and a
platform counts arrivals, not slots. The gate holds each call until the
replica's own recent calls to the same pacing rows allow it, so late sends go
out spaced, never bunched.
"""

from __future__ import annotations

from collections.abc import Mapping

from watchkeeper.clock import Clock

#: Past moments kept for at most this many rows before the spent ones are dropped.
PRUNE_AT = 4096


class SendGate:
    """Per pacing row, the moment this replica's schedule of calls would be back in full:
    one ``gap`` further for each call, a call allowed ``burst`` ahead of it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._tat: dict[str, float] = {}

    async def wait(self, gaps: Mapping[str, float], bursts: Mapping[str, float]) -> float:
        """Wait until every row of ``gaps`` allows a call, take it; returns the moment."""
        while True:
            now = self.clock.now()
            at = max([now, *(self._tat.get(p, now) - bursts.get(p, 0.0) for p in gaps)])
            if at <= now:
                for place, gap in gaps.items():
                    self._tat[place] = max(self._tat.get(place, now), now) + gap
                if len(self._tat) > PRUNE_AT:
                    self._tat = {p: t for p, t in self._tat.items() if t > now}
                return now
            await self.clock.sleep_until(at)  # others may take the row meanwhile: look again
