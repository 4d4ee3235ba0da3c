"""The job queue's store; :class:`QueueStore` is its one entry point."""

from __future__ import annotations

from watchkeeper.store.queue.leases import QueueStore

__all__ = ["QueueStore"]
