"""Which incidents a list shows: the filters of the incidents page and its exports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, or_

from watchkeeper.clock import to_epoch
from watchkeeper.store.schema import incidents

#: Statuses a list may ask for; ``live`` means open or recovered.
STATUSES = ("live", "open", "recovered", "resolved")
#: ``decided_by`` for the incidents nobody decided.
NOBODY = "nobody"


@dataclass(frozen=True, slots=True)
class IncidentQuery:
    """Filters on incidents; a field left ``None`` matches every incident."""

    status: str | None = None
    kind: str | None = None
    condition: str | None = None
    #: Who decided (``@name``), or :data:`NOBODY` for the undecided.
    decided_by: str | None = None
    #: Opened at or after this time.
    since: datetime | None = None
    #: Opened before this time.
    until: datetime | None = None
    #: Found, in any case, in the title, the run id or the reason.
    text: str | None = None


def conditions(query: IncidentQuery) -> list[ColumnElement[bool]]:
    """The SQL conditions of ``query``."""
    c = incidents.c
    found: list[ColumnElement[bool]] = []
    if query.status == "live":
        found.append(c.status.in_(("open", "recovered")))
    elif query.status is not None:
        found.append(c.status == query.status)
    if query.kind is not None:
        found.append(c.kind == query.kind)
    if query.condition is not None:
        found.append(c.condition == query.condition)
    if query.decided_by == NOBODY:
        found.append(c.decided_by.is_(None))
    elif query.decided_by is not None:
        found.append(c.decided_by == query.decided_by)
    if query.since is not None:
        found.append(c.opened_at >= to_epoch(query.since))
    if query.until is not None:
        found.append(c.opened_at < to_epoch(query.until))
    if query.text:
        # LIKE's own wildcards in the text are matched as themselves.
        escaped = query.text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = f"%{escaped}%"
        found.append(
            or_(
                *(
                    func.lower(column).like(pattern, escape="\\")
                    for column in (c.title, c.run_id, c.reason)
                )
            )
        )
    return found
