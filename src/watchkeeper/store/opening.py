"""Opening the store for commands that start processes: migrate only when behind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchkeeper.store.shipped import shipped_head

if TYPE_CHECKING:
    from watchkeeper.store import Store


def open_store(url: str) -> Store:
    """Open the store, running Alembic only when the schema is behind the shipped migrations.

    Commands that start processes pay for every millisecond: checking the
    revision is one query, while a full ``upgrade`` loads every migration script.
    """
    from watchkeeper.store import Store
    from watchkeeper.store.migrate import current_revision, upgrade

    store = Store(url, migrate=False)
    try:
        head = shipped_head()
        if head is None or current_revision(store.engine) != head:
            upgrade(store.engine)
    except BaseException:
        store.close()
        raise
    return store
