"""From verdicts to incident changes: the incident lifecycle's rules, as a pure function.

- A paged verdict with no live incident of the same key opens one (or reopens
  the earlier incident of that key: one incident per work, condition and
  failure fingerprint, ever).
- An open stalled or stuck incident whose work progresses again is marked
  recovered ("moved again"), once.
- An incident is resolved when its work ends, when the work starts again
  after failing, when its condition turns into another one (stalled into
  stuck, say), or when the kind no longer reports the work at all.
- An unreadable kind changes nothing: its incidents stay as they are.
- A dismissed incident's key is never opened again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from watchkeeper.contract import Condition, KindRead, KindSpec, RunView, Verdict
from watchkeeper.judge import judge
from watchkeeper.redact import redact
from watchkeeper.store.incidents import (
    Changes,
    Incident,
    IncidentKey,
    IncidentStatus,
    Opening,
)


@dataclass(frozen=True, slots=True)
class Judged:
    """One run and the judge's verdict on it (``None``: nothing wrong)."""

    run: RunView
    verdict: Verdict | None


def judge_reads(
    reads: Sequence[KindRead], specs: Mapping[str, KindSpec], now: datetime
) -> dict[str, list[Judged]]:
    """Judge every run of every readable kind."""
    judged: dict[str, list[Judged]] = {}
    for read in reads:
        if not read.readable:
            continue
        spec = specs[read.kind]
        judged[read.kind] = [Judged(run, judge(run, spec, now)) for run in read.runs]
    return judged


def key_of(run: RunView, verdict: Verdict) -> IncidentKey:
    """The identity of the incident ``verdict`` calls for."""
    return IncidentKey(run.kind, run.run_id, verdict.condition.value, verdict.fingerprint)


def plan(
    judged: Mapping[str, Sequence[Judged]],
    live: Sequence[Incident],
    suppressed: Set[IncidentKey] = frozenset(),
) -> Changes:
    """The incident changes one sweep calls for, given the live and the dismissed incidents."""
    live_by_key = {incident.key: incident for incident in live}
    openings: list[Opening] = []
    renewals: list[Opening] = []
    token_updates: list[tuple[int, str]] = []
    current: dict[tuple[str, str], Judged] = {}
    for items in judged.values():
        for item in items:
            current[(item.run.kind, item.run.run_id)] = item
            verdict = item.verdict
            if verdict is None or not verdict.paged:
                continue
            key = key_of(item.run, verdict)
            if key in suppressed:
                continue
            existing = live_by_key.get(key)
            if existing is None or existing.status is not IncidentStatus.OPEN:
                openings.append(_opening(key, item.run, verdict))
            elif existing.state_token != item.run.state_token:
                if existing.decision is not None:
                    # Decided, then the work moved and is here again (retried and failed the
                    # same way, say): a new episode that needs a new decision.
                    renewals.append(_opening(key, item.run, verdict))
                else:
                    token_updates.append((existing.id, item.run.state_token))
    recoveries, resolutions = _settle(judged, live, current)
    return Changes(openings, recoveries, resolutions, token_updates, renewals)


def _settle(
    judged: Mapping[str, Sequence[Judged]],
    live: Sequence[Incident],
    current: Mapping[tuple[str, str], Judged],
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    recoveries: list[tuple[int, str]] = []
    resolutions: list[tuple[int, str]] = []
    for incident in live:
        if incident.key.kind not in judged:
            continue  # unreadable kind: never read as "nothing running"
        item = current.get((incident.key.kind, incident.key.run_id))
        if item is None:
            resolutions.append((incident.id, "the kind no longer reports this work"))
            continue
        verdict = item.verdict
        if verdict is not None and verdict.paged and key_of(item.run, verdict) == incident.key:
            continue
        outcome = _outcome(incident, item.run, verdict)
        if outcome is None:
            continue
        target, note = outcome
        (recoveries if target is IncidentStatus.RECOVERED else resolutions).append(
            (incident.id, note)
        )
    return recoveries, resolutions


def _outcome(
    incident: Incident, run: RunView, verdict: Verdict | None
) -> tuple[IncidentStatus, str] | None:
    if run.status.ended:
        return IncidentStatus.RESOLVED, f"the work ended: {run.status.value}"
    if incident.key.condition == Condition.FAILED.value:
        return IncidentStatus.RESOLVED, "the work was started again"
    if verdict is not None and verdict.paged:
        return IncidentStatus.RESOLVED, f"the work is now {verdict.condition.value}"
    if incident.status is IncidentStatus.OPEN:
        return IncidentStatus.RECOVERED, _moved_note(run)
    return None


def _moved_note(run: RunView) -> str:
    return f"moved again: {redact(run.step)}" if run.step else "moved again"


def _opening(key: IncidentKey, run: RunView, verdict: Verdict) -> Opening:
    origin = run.origin
    origin_dict = (
        None
        if origin.platform is None
        else {
            k: v
            for k, v in {
                "platform": origin.platform,
                "chat_id": origin.chat_id,
                "thread_id": origin.thread_id,
                "message_id": origin.message_id,
            }.items()
            if v is not None
        }
    )
    return Opening(
        key=key,
        # Kinds read from other stores (a process's name, a task's failure) may hold what
        # no report redacted: an incident, its events and its cards keep them redacted.
        title=redact(run.title),
        reason=redact(verdict.reason),
        since=verdict.since,
        state_token=run.state_token,
        origin=origin_dict,
        effects=run.effects.value,
    )
