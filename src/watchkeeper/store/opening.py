"""Opening the store for commands that start processes: migrate only when behind."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

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
        head = _shipped_head()
        if head is None or current_revision(store.engine) != head:
            upgrade(store.engine)
    except BaseException:
        store.close()
        raise
    return store


def _shipped_head() -> str | None:
    """The newest ``NNNN_name.py`` revision shipped; ``None`` if the names do not say."""
    from watchkeeper.store.migrate import MIGRATIONS

    names = [p.name for p in (MIGRATIONS / "versions").glob("*.py") if p.name != "__init__.py"]
    found = [re.match(r"^(\d{4})_\w+\.py$", name) for name in names]
    if not found or not all(found):
        return None
    return max(match.group(1) for match in found if match)
