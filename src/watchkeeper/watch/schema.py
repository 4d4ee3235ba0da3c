"""The schema revision of the database a server runs on, and the one its code expects."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchkeeper.store import Store


def schema_revisions(store: Store) -> tuple[str | None, str | None]:
    """``(database, code)``: the database's revision (``None`` if empty), and the newest shipped."""
    # Lazy: the migration tooling is loaded only by whoever asks.
    from watchkeeper.store.migrate import current_revision, head_revision

    return current_revision(store.engine), head_revision()
