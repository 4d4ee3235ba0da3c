"""The incidents the sweep opens, as the API, the dashboard and its live stream read them.

The incident records are defined beside their tables
(:mod:`watchkeeper.store.incidents`, :mod:`watchkeeper.store.decisions`) and
re-exported here, so the layers above the services name them without
importing the store.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Literal

from watchkeeper.clock import Now
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord, Press
from watchkeeper.store.incident_query import NOBODY, STATUSES, IncidentQuery
from watchkeeper.store.incidents import Decision, Incident
from watchkeeper.store.outbox import Delivery

__all__ = [
    "NOBODY",
    "STATUSES",
    "ActionRecord",
    "Decision",
    "Incident",
    "IncidentDetail",
    "IncidentQuery",
    "IncidentService",
    "Press",
]

#: Which incidents a list shows: ``live`` means open or recovered.
Listed = Literal["live", "open", "recovered", "resolved"]


@dataclass(frozen=True, slots=True)
class IncidentDetail:
    """One incident with its history, who pressed what, and its action journal."""

    incident: Incident
    presses: list[Press]
    journal: list[ActionRecord]


class IncidentService:
    """Reads incidents and their decisions; switches the automatic first steps."""

    def __init__(self, store: Store, clock: Now) -> None:
        self._incidents = store.incidents
        self._decisions = store.decisions
        self._outbox = store.outbox
        self._clock = clock

    def first_card(self, incident_id: int) -> Delivery | None:
        """The first card sent about the incident (edits and notes thread under it)."""
        return next(
            (d for d in self._outbox.for_incident(incident_id) if d.purpose == "card"), None
        )

    def list(
        self, status: Listed | None = None, limit: int = 200, offset: int = 0
    ) -> list[Incident]:
        """Incidents, newest first."""
        return self._incidents.list(status, limit, offset)

    def search(
        self, query: IncidentQuery, limit: int = 200, offset: int = 0
    ) -> tuple[builtins.list[Incident], int]:
        """The incidents ``query`` finds, newest first, one page; and how many in all."""
        return self._incidents.search(query, limit, offset)

    def get(self, incident_id: int) -> Incident:
        """One incident with its history (``NotFound`` if there is none)."""
        return self._incidents.get(incident_id)

    def detail(self, incident_id: int) -> IncidentDetail:
        """One incident with its history, its presses and its action journal."""
        incident = self._incidents.get(incident_id)
        presses = self._decisions.presses_for(incident_id)
        return IncidentDetail(incident, presses, self._decisions.actions_for_incident(incident_id))

    def open_count(self) -> int:
        """How many incidents are open now."""
        return self._incidents.count_by_status().get("open", 0)

    def switch_runbook(self, name: str, enabled: bool, by: str) -> None:
        """Switch the automatic first step ``name`` on or off, as ``by`` asked."""
        self._decisions.set_runbook(name, enabled, by, self._clock())
