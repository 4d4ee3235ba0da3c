"""Read-only evidence about an incident, gathered once for any diagnoser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.clock import rfc3339
from watchkeeper.contract import Action, RunView, Verdict
from watchkeeper.errors import WatchkeeperError
from watchkeeper.judge import judge
from watchkeeper.kinds.base import Adapter
from watchkeeper.redact import redact, tail
from watchkeeper.store.incidents import Incident, IncidentStatus


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a diagnosis may look at: nothing here can change the work.

    ``run`` is the work as its kind reports it now, which may have moved on
    from what the incident recorded, and ``verdict`` the judge's finding on it
    now; ``open_now`` is another incident open for the same work now, if any;
    ``offered`` are the buttons the incident offers now, the only ones a
    diagnosis may recommend.
    """

    incident: Incident
    run: RunView | None
    facts: dict[str, str] = field(default_factory=dict)
    read_error: str | None = None
    offered: tuple[Action, ...] = ()
    verdict: Verdict | None = None
    open_now: Incident | None = None

    def run_json(self) -> dict[str, Any]:
        """The run as a tool answer."""
        run = self.run
        if run is None:
            return {"error": self.read_error or "the kind no longer reports this work"}
        return {
            "status": run.status.value,
            "title": run.title,
            "owner": {
                "kind": run.owner.kind.value,
                "id": run.owner.ident,
                "alive": run.owner.alive,
            },
            "progress_at": rfc3339(run.progress_at),
            "started_at": rfc3339(run.started_at),
            "finished_at": rfc3339(run.finished_at),
            "step": redact(run.step) if run.step else None,
            "effects": run.effects.value,
            "failure": None if run.failure is None else redact(run.failure.reason),
        }

    def history_json(self) -> list[dict[str, Any]]:
        """The incident's history as a tool answer."""
        return [
            {"at": rfc3339(e.at), "type": e.type, "detail": redact(e.detail or "")}
            for e in self.incident.events
        ]

    def facts_json(self) -> dict[str, str]:
        """Extra facts (exit status, log tail), redacted."""
        return {key: tail(value, lines=20) for key, value in self.facts.items()}


def gather(
    adapters: Mapping[str, Adapter],
    incident: Incident,
    now: datetime,
    offered: Sequence[Action] = (),
    live: Sequence[Incident] = (),
) -> Evidence:
    """Collect evidence; a kind that cannot be read is noted, not fatal.

    ``live``: live incidents of the same work; the newest open one other than
    ``incident`` is the one open for it now.
    """
    shown = tuple(offered)
    others = [
        other
        for other in live
        if other.id != incident.id
        and other.status is IncidentStatus.OPEN
        and (other.key.kind, other.key.run_id) == (incident.key.kind, incident.key.run_id)
    ]
    open_now = max(others, key=lambda other: other.id, default=None)
    adapter = adapters.get(incident.key.kind)
    if adapter is None:
        missing = f"kind {incident.key.kind} is no longer configured"
        return Evidence(incident, None, read_error=missing, offered=shown, open_now=open_now)
    try:
        run = adapter.read_one(incident.key.run_id, now)
        facts = adapter.evidence(incident.key.run_id)
    except WatchkeeperError as exc:
        return Evidence(incident, None, read_error=str(exc), offered=shown, open_now=open_now)
    verdict = None if run is None else judge(run, adapter.spec, now)
    return Evidence(incident, run, facts, offered=shown, verdict=verdict, open_now=open_now)
