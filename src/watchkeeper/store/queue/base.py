"""What every part of the queue's store holds."""

from __future__ import annotations

from watchkeeper.store.base import Accessor


class Part(Accessor):
    """The engine and its dialect, shared by the parts :class:`QueueStore` is made of."""
