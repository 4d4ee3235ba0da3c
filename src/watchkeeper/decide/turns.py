"""Presses of one incident in this process take turns at checking and claiming it.

When a card is pressed by many people at once, the first press checks the
work and makes the conditional UPDATE; the others wait for it (a few
milliseconds), then read the incident, find it decided and are answered
without queueing for the database's write lock. Across processes and
replicas the conditional UPDATE still decides alone: this only spares the
database the claims that cannot win.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Turns:
    """One lock per incident being pressed, made on demand and dropped when no press holds it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        #: incident id -> (its lock, presses holding or waiting for it)
        self._held: dict[int, tuple[threading.Lock, int]] = {}

    @contextmanager
    def turn(self, incident_id: int) -> Iterator[bool]:
        """Hold ``incident_id``'s turn for the block; yields whether another press went first."""
        with self._guard:
            lock, users = self._held.get(incident_id, (threading.Lock(), 0))
            self._held[incident_id] = (lock, users + 1)
        waited = not lock.acquire(blocking=False)
        if waited:
            lock.acquire()
        try:
            yield waited
        finally:
            lock.release()
            with self._guard:
                users = self._held[incident_id][1] - 1
                if users:
                    self._held[incident_id] = (lock, users)
                else:
                    del self._held[incident_id]
