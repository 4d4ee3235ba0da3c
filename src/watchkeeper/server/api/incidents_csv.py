"""Incidents as a CSV file: one row each, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from watchkeeper.clock import rfc3339
from watchkeeper.watch.incidents import Incident

#: The most incidents one export holds.
EXPORT_MAX = 10_000
COLUMNS = (
    "id",
    "kind",
    "run_id",
    "condition",
    "status",
    "title",
    "reason",
    "opened_at",
    "resolved_at",
    "resolution",
    "episodes",
    "decided_action",
    "decided_by",
    "decided_via",
    "decided_at",
)
#: A cell starting with one of these is a formula to a spreadsheet (``@`` too, in Excel): it is
#: written with a leading ``'``, which spreadsheets read as "this is text".
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def incidents_csv(items: Sequence[Incident]) -> str:
    """``items`` as CSV with a header row."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for incident in items:
        decision = incident.decision
        writer.writerow(
            _cell(value)
            for value in (
                incident.id,
                incident.key.kind,
                incident.key.run_id,
                incident.key.condition,
                incident.status.value,
                incident.title,
                incident.reason,
                rfc3339(incident.opened_at),
                rfc3339(incident.resolved_at),
                incident.resolution,
                incident.episodes,
                decision and decision.action,
                decision and decision.actor,
                decision and decision.via,
                decision and rfc3339(decision.at),
            )
        )
    return out.getvalue()


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA) else text
