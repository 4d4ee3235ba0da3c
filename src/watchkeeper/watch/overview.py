"""What needs attention, what runs, and what finished: the list behind ``runs``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.clock import rfc3339
from watchkeeper.contract import (
    Condition,
    Effects,
    KindRead,
    RunStatus,
    RunView,
    Verdict,
    origin_of,
)
from watchkeeper.store.incidents import Incident, IncidentKey
from watchkeeper.watch.lifecycle import Judged, key_of


@dataclass(frozen=True, slots=True)
class LastSeen:
    """Work listed from its incident alone, because its kind cannot be read now."""

    at: datetime
    kind: str

    @property
    def text(self) -> str:
        """``last seen 2026-01-05 12:02 UTC, before crawler became unreadable``."""
        return f"last seen {self.at:%Y-%m-%d %H:%M} UTC, before {self.kind} became unreadable"


@dataclass(frozen=True, slots=True)
class Overview:
    """The runs list, sorted into sections.

    ``last_seen`` marks the runs listed from their open incident because their
    kind could not be read: they still need attention, as last seen.
    """

    generated_at: datetime
    attention: tuple[Judged, ...]
    running: tuple[Judged, ...]
    finished: tuple[Judged, ...]
    unreadable: tuple[KindRead, ...]
    incidents: Mapping[tuple[str, str], Incident]
    dealt_with: tuple[Judged, ...] = ()
    last_seen: Mapping[tuple[str, str], LastSeen] = field(default_factory=dict)


def build(
    reads: Sequence[KindRead],
    judged: Mapping[str, Sequence[Judged]],
    live_incidents: Sequence[Incident],
    now: datetime,
    include_finished: bool,
    suppressed: Set[IncidentKey] = frozenset(),
    last_read: Mapping[str, datetime] | None = None,
) -> Overview:
    """Sort judged runs: what needs a person, then active work, then (optionally) ended work.

    Work whose incident was decided (or dismissed) no longer needs attention:
    with ``include_finished`` it is listed as dealt with. An open incident of
    a kind that cannot be read is listed as its incident last saw the work,
    marked with when that was (``last_read``: when each kind was last read).
    """
    incidents = {
        (i.key.kind, i.key.run_id): i
        for i in sorted(live_incidents, key=lambda i: i.id)
        if i.status.value == "open"
    }
    lists = _Lists(include_finished)
    for items in judged.values():
        for item in items:
            lists.sort_in(item, incidents, suppressed)
    unreadable = tuple(r for r in reads if not r.readable)
    blind = {r.kind for r in unreadable}
    last_seen: dict[tuple[str, str], LastSeen] = {}
    for where, incident in incidents.items():
        if incident.key.kind in blind:
            read_at = None if last_read is None else last_read.get(incident.key.kind)
            last_seen[where] = lists.sort_in_unread(incident, read_at)
    lists.attention.sort(key=lambda j: j.verdict.since if j.verdict else now)
    lists.running.sort(key=lambda j: j.run.started_at or now, reverse=True)
    lists.finished.sort(key=lambda j: j.run.finished_at or now, reverse=True)
    return Overview(
        now,
        tuple(lists.attention),
        tuple(lists.running),
        tuple(lists.finished),
        unreadable,
        incidents,
        tuple(lists.dealt_with),
        last_seen,
    )


@dataclass
class _Lists:
    """The overview's lists as runs are sorted into them."""

    include_finished: bool
    attention: list[Judged] = field(default_factory=list)
    dealt_with: list[Judged] = field(default_factory=list)
    running: list[Judged] = field(default_factory=list)
    finished: list[Judged] = field(default_factory=list)

    def sort_in(
        self,
        item: Judged,
        incidents: Mapping[tuple[str, str], Incident],
        suppressed: Set[IncidentKey],
    ) -> None:
        """A paged verdict needs a person unless its incident was decided or dismissed;
        other work is running or (when asked for) finished."""
        if item.verdict is not None and item.verdict.paged:
            incident = incidents.get((item.run.kind, item.run.run_id))
            dismissed = key_of(item.run, item.verdict) in suppressed
            if dismissed or (incident is not None and incident.decision is not None):
                if self.include_finished:
                    self.dealt_with.append(item)
            else:
                self.attention.append(item)
        elif not item.run.status.ended:
            self.running.append(item)
        elif self.include_finished:
            self.finished.append(item)

    def sort_in_unread(self, incident: Incident, read_at: datetime | None) -> LastSeen:
        """An open incident of a kind that cannot be read, listed as it last saw the work;
        when that was."""
        item = _as_last_seen(incident)
        if incident.decision is None:
            self.attention.append(item)
        elif self.include_finished:
            self.dealt_with.append(item)
        seen = [t for t in (read_at, incident.updated_at) if t]
        return LastSeen(max(seen), incident.key.kind)


def _as_last_seen(incident: Incident) -> Judged:
    """The run as its open incident last recorded it."""
    condition = Condition(incident.key.condition)
    status = RunStatus.FAILED if condition is Condition.FAILED else RunStatus.RUNNING
    run = RunView(
        kind=incident.key.kind,
        run_id=incident.key.run_id,
        title=incident.title,
        status=status,
        state_token=incident.state_token,
        origin=origin_of(incident.origin),
        effects=Effects(incident.effects),
    )
    verdict = Verdict(condition, incident.since, incident.reason, incident.key.fingerprint)
    return Judged(run, verdict)


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
        "reported_at": rfc3339(run.reported_at),
        "repeats": run.repeats,
        "step_budget_s": run.step_budget_s,
        "step_expected_s": run.step_expected_s,
        "done": run.done,
        "total": run.total,
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
        "effects": run.effects.value,
        "failure": None
        if run.failure is None
        else {"reason": run.failure.reason, "fingerprint": run.failure.fingerprint},
    }


def judged_json(
    item: Judged, incident: Incident | None, last_seen: LastSeen | None = None
) -> dict[str, Any]:
    """One line of the runs list; ``last_seen`` when its kind cannot be read now."""
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
        "last_seen": None
        if last_seen is None
        else {"at": rfc3339(last_seen.at), "text": last_seen.text},
    }


def overview_json(overview: Overview, limit: int) -> dict[str, Any]:
    """The whole runs list as JSON; long sections are cut at ``limit`` with a count."""

    def section(items: tuple[Judged, ...]) -> list[dict[str, Any]]:
        return [
            judged_json(
                item,
                overview.incidents.get((item.run.kind, item.run.run_id)),
                overview.last_seen.get((item.run.kind, item.run.run_id)),
            )
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
