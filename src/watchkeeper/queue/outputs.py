"""A task's output: the tail its runner keeps, what it ships while running, read back.

The API and the dashboard read and write a task's output through this service, never
through the queue's store.
"""

from __future__ import annotations

from watchkeeper.clock import Now
from watchkeeper.queue.output import Piece, Shipped, ship
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.queue.output import ShippedOutput, TaskOutput


class TaskOutputs:
    """Reads and keeps tasks' output."""

    def __init__(self, store: QueueStore, clock: Now) -> None:
        self.store = store
        self.clock = clock

    def keep(self, task_id: str, lease_token: str, tail: str) -> bool:
        """Keep ``tail`` as the task's output while ``lease_token`` holds its live lease;
        ``False`` (nothing kept) when the lease is gone."""
        return self.store.record_output(task_id, lease_token, tail, self.clock())

    def kept(self, task_id: str) -> TaskOutput | None:
        """The tail its runner kept, ``None`` if none was sent; :class:`NotFound` for no task."""
        return self.store.output(task_id)

    def shipped(self, task_id: str, last: int | None = None) -> ShippedOutput | None:
        """What the task's last run shipped (its ``last`` pieces if given); ``None`` if none."""
        return self.store.shipped_output(task_id, last=last)

    def ship(self, task_id: str, lease_token: str, piece: Piece) -> Shipped | None:
        """Keep ``piece`` of a running task's output within the cap; ``None`` when the lease
        is gone."""
        return ship(self.store, task_id, lease_token, piece, self.clock())
