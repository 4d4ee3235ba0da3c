"""What needs attention, what runs, and what finished: the list behind ``runs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchkeeper.clock import rfc3339
from watchkeeper.contract import KindRead, RunView, Verdict
from watchkeeper.store.incidents import Incident, IncidentKey
from watchkeeper.watch.lifecycle import Judged, key_of


@dataclass(frozen=True, slots=True)
class Overview:
    """The runs list, sorted into sections."""

    generated_at: datetime
    attention: tuple[Judged, ...]
    running: tuple[Judged, ...]
    finished: tuple[Judged, ...]
    unreadable: tuple[KindRead, ...]
    incidents: Mapping[tuple[str, str], Incident]
    dealt_with: tuple[Judged, ...] = ()


def build(
    reads: Sequence[KindRead],
    judged: Mapping[str, Sequence[Judged]],
    live_incidents: Sequence[Incident],
    now: datetime,
    include_finished: bool,
    suppressed: Set[IncidentKey] = frozenset(),
) -> Overview:
    """Sort judged runs: what needs a person, then active work, then (optionally) ended work.

    Work whose incident was decided (or dismissed) no longer needs attention:
    with ``include_finished`` it is listed as dealt with.
    """
    incidents = {
        (i.key.kind, i.key.run_id): i
        for i in sorted(live_incidents, key=lambda i: i.id)
        if i.status.value == "open"
    }
    attention: list[Judged] = []
    dealt_with: list[Judged] = []
    running: list[Judged] = []
    finished: list[Judged] = []
    for items in judged.values():
        for item in items:
            if item.verdict is not None and item.verdict.paged:
                incident = incidents.get((item.run.kind, item.run.run_id))
                dismissed = key_of(item.run, item.verdict) in suppressed
                if dismissed or (incident is not None and incident.decision is not None):
                    if include_finished:
                        dealt_with.append(item)
                else:
                    attention.append(item)
            elif not item.run.status.ended:
                running.append(item)
            elif include_finished:
                finished.append(item)
    attention.sort(key=lambda j: j.verdict.since if j.verdict else now)
    running.sort(key=lambda j: j.run.started_at or now, reverse=True)
    finished.sort(key=lambda j: j.run.finished_at or now, reverse=True)
    return Overview(
        now,
        tuple(attention),
        tuple(running),
        tuple(finished),
        tuple(r for r in reads if not r.readable),
        incidents,
        tuple(dealt_with),
    )


def verdict_json(verdict: Verdict | None) -> dict[str, Any] | None:
    """A verdict as the API shows it."""
    if verdict is None:
        return None
    return {
        "condition": verdict.condition.value,
        "since": rfc3339(verdict.since),
        "reason": verdict.reason,
        "paged": verdict.paged,
    }


def run_json(run: RunView) -> dict[str, Any]:
    """A run as the API shows it (any kind)."""
    return {
        "kind": run.kind,
        "run_id": run.run_id,
        "title": run.title,
        "status": run.status.value,
        "state_token": run.state_token,
        "step": run.step,
        "owner": {
            "kind": run.owner.kind.value,
            "id": run.owner.ident,
            "alive": run.owner.alive,
            "expires_at": rfc3339(run.owner.expires_at),
        },
        "progress_at": rfc3339(run.progress_at),
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
        "effects": run.effects.value,
        "failure": None
        if run.failure is None
        else {"reason": run.failure.reason, "fingerprint": run.failure.fingerprint},
    }


def judged_json(item: Judged, incident: Incident | None) -> dict[str, Any]:
    """One line of the runs list."""
    decision = None if incident is None else incident.decision
    return {
        **run_json(item.run),
        "verdict": verdict_json(item.verdict),
        "incident_id": None if incident is None else incident.id,
        "decision": None
        if decision is None
        else {
            "action": decision.action,
            "by": decision.actor,
            "via": decision.via,
            "at": rfc3339(decision.at),
        },
    }


def overview_json(overview: Overview, limit: int) -> dict[str, Any]:
    """The whole runs list as JSON; long sections are cut at ``limit`` with a count."""

    def section(items: tuple[Judged, ...]) -> list[dict[str, Any]]:
        return [
            judged_json(item, overview.incidents.get((item.run.kind, item.run.run_id)))
            for item in items[:limit]
        ]

    return {
        "generated_at": rfc3339(overview.generated_at),
        "attention": section(overview.attention),
        "running": section(overview.running),
        "finished": section(overview.finished),
        "dealt_with": section(overview.dealt_with),
        "counts": {
            "attention": len(overview.attention),
            "running": len(overview.running),
            "finished": len(overview.finished),
            "dealt_with": len(overview.dealt_with),
        },
        "unreadable": [{"kind": r.kind, "error": r.error} for r in overview.unreadable],
    }
