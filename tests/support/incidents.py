"""Incidents put straight into a store, for tests of lists, filters and exports."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from watchkeeper.store import Store
from watchkeeper.store.decisions import Claim
from watchkeeper.store.incidents import Changes, IncidentKey, Opening

#: (kind, run id, condition, title, hours after the start it opened)
Made = tuple[str, str, str, str, int]


def open_incidents(store: Store, made: Sequence[Made], start: datetime) -> dict[str, int]:
    """Open one incident per row of ``made``, each at its hour; their ids by run id."""
    for kind, run_id, condition, title, hours in made:
        opening = Opening(
            IncidentKey(kind, run_id, condition),
            title,
            f"{condition}: {title}",
            start,
            "tok",
            None,
            "unknown",
        )
        store.incidents.apply(Changes(openings=[opening]), start + timedelta(hours=hours))
    return {i.key.run_id: i.id for i in store.incidents.list(limit=1000)}


def decide(store: Store, incident_id: int, kind: str, run_id: str, at: datetime) -> None:
    """``@ana`` retries the incident on Slack at ``at``."""
    claim = Claim(incident_id, "retry", "@ana", "slack", "tok", False, False, "h", 1)
    store.decisions.claim(claim, kind, run_id, at)
