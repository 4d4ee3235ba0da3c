"""What every part of the queue's store holds."""

from __future__ import annotations

from sqlalchemy import Engine

from watchkeeper.store.engine import is_sqlite


class Part:
    """The engine and its dialect, shared by the parts :class:`QueueStore` is made of."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = is_sqlite(engine)
