"""What one routing pass reads about its incidents, in one transaction and a statement each.

A pass routes the events of many incidents at once (a sweep can open hundreds); reading
each incident and its action journal by itself made those reads most of routing's cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from watchkeeper.store.base import Accessor, record_from_row
from watchkeeper.store.decisions import ActionRecord, ActionStatus
from watchkeeper.store.incidents import Incident
from watchkeeper.store.schema import actions, incidents

#: Ids in one ``IN`` list at most (SQLite allows 32,766 parameters in a statement).
CHUNK = 500


@dataclass(frozen=True, slots=True)
class PassReads:
    """The incidents of a pass (without their history) and their journals, oldest first.

    An incident deleted since its events were written is absent; one with no
    action has an empty journal.
    """

    incidents: dict[int, Incident]
    journals: dict[int, tuple[ActionRecord, ...]]


class RoutingReads(Accessor):
    """Reads for routing passes."""

    def read(self, incident_ids: Iterable[int]) -> PassReads:
        """The incidents of ``incident_ids`` and their action journals, read together."""
        ids = sorted(set(incident_ids))
        found: dict[int, Incident] = {}
        journals: dict[int, list[ActionRecord]] = {incident_id: [] for incident_id in ids}
        with self._read("reading incidents to route") as conn:
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                for row in conn.execute(select(incidents).where(incidents.c.id.in_(chunk))):
                    found[row.id] = Incident.from_row(row)
                rows = conn.execute(
                    select(actions).where(actions.c.incident_id.in_(chunk)).order_by(actions.c.id)
                )
                for row in rows:
                    record = record_from_row(
                        ActionRecord,
                        row,
                        times=("started_at", "finished_at"),
                        status=ActionStatus(row.status),
                    )
                    journals[record.incident_id].append(record)
        return PassReads(found, {key: tuple(value) for key, value in journals.items()})
