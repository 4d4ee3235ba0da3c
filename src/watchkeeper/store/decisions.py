"""Decisions, presses and the action journal. The rules of who may press what live in ``decide/``.

A decision is one conditional UPDATE (``... WHERE decided_at IS NULL AND
state_token = :token``), committed together with the press that won and, for
actions with effects, the journal row in ``started``: the journal row exists
before the kind's function runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, Row, insert, select, update

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.base import Accessor, record_from_row, upsert
from watchkeeper.store.group_commit import GroupCommit
from watchkeeper.store.incidents import Decision, IncidentKey, IncidentStatus, _event

__all__ = [
    "ActionRecord",
    "ActionStatus",
    "Claim",
    "ClaimResult",
    "Decision",
    "DecisionStore",
    "Press",
]
from watchkeeper.store.schema import actions, incidents, presses, runbook_switches


class ActionStatus(StrEnum):
    """A journal row only moves forward: started -> done / failed / interrupted."""

    STARTED = "started"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class Press:
    """One press on one incident, whatever came of it."""

    incident_id: int
    at: datetime
    actor: str
    via: str
    action: str
    state_token: str | None
    outcome: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One row of the action journal."""

    id: int
    incident_id: int
    kind: str
    run_id: str
    action: str
    actor: str
    via: str
    status: ActionStatus
    started_at: datetime
    finished_at: datetime | None
    answer: str | None
    host: str
    pid: int
    #: The replica that ran it; ``None`` on rows written before replicas were named.
    replica: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """What a winning press needs to journal, decided in the same transaction."""

    incident_id: int
    action: str
    actor: str
    via: str
    state_token: str
    dismiss: bool
    journal: bool
    host: str
    pid: int
    resolution: str | None = None
    replica: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Whether the claim won; the journal row's id when one was written."""

    won: bool
    action_id: int | None = None


def _press_values(press: Press) -> dict[str, Any]:
    return {
        "incident_id": press.incident_id,
        "at": to_epoch(press.at),
        "actor": press.actor[:200],
        "via": press.via[:32],
        "action": press.action[:32],
        "state_token": press.state_token[:100] if press.state_token else None,
        "outcome": press.outcome,
        "detail": press.detail[:2000] if press.detail else None,
    }


def _record(row: Row[Any]) -> ActionRecord:
    status = ActionStatus(row._mapping["status"])
    return record_from_row(ActionRecord, row, times=("started_at", "finished_at"), status=status)


class DecisionStore(Accessor):
    """Conditional decisions, the press history and the action journal."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # Losing presses of a crowded card share the write lock once between them.
        self._losers: GroupCommit[Press, None] = GroupCommit(self._record_presses, window_s=0.0)

    def claim(self, claim: Claim, kind: str, run_id: str, now: datetime) -> ClaimResult:
        """Try to decide: exactly one claim per incident wins, on every replica."""
        at = to_epoch(now)
        values: dict[str, object] = {
            "decided_at": at,
            "decided_by": claim.actor,
            "decided_via": claim.via,
            "decided_action": claim.action,
            "updated_at": at,
        }
        if claim.dismiss:
            values.update(
                suppressed=True,
                status=IncidentStatus.RESOLVED.value,
                resolved_at=at,
                resolution=claim.resolution,
            )
        statement = (
            update(incidents)
            .where(
                incidents.c.id == claim.incident_id,
                incidents.c.decided_at.is_(None),
                incidents.c.state_token == claim.state_token,
                incidents.c.status != IncidentStatus.RESOLVED.value,
            )
            .values(**values)
        )
        with self._write("deciding an incident") as conn:
            if conn.execute(statement).rowcount != 1:
                return ClaimResult(False)
            self._press(
                conn,
                Press(
                    claim.incident_id,
                    now,
                    claim.actor,
                    claim.via,
                    claim.action,
                    claim.state_token,
                    "won",
                ),
            )
            _event(
                conn,
                claim.incident_id,
                at,
                "decided",
                f"{claim.action} by {claim.actor} via {claim.via}",
            )
            action_id = None
            if claim.journal:
                action_id = int(
                    conn.execute(
                        insert(actions)
                        .values(
                            incident_id=claim.incident_id,
                            kind=kind,
                            run_id=run_id,
                            action=claim.action,
                            actor=claim.actor,
                            via=claim.via,
                            status=ActionStatus.STARTED.value,
                            started_at=at,
                            host=claim.host,
                            pid=claim.pid,
                            replica=claim.replica[:200] if claim.replica else None,
                        )
                        .returning(actions.c.id)
                    ).scalar_one()
                )
        return ClaimResult(True, action_id)

    def record_press(self, press: Press) -> None:
        """Append a press that did not win (refused, stale, already decided, diagnosed).

        Returns once the row is committed; presses recorded at the same moment from
        other threads share its transaction.
        """
        self._losers.run([press])

    def record_presses(self, rows: Sequence[Press]) -> None:
        """Append presses that did not win, all in one transaction (shared, like
        :meth:`record_press`'s, with what other threads record at the same moment)."""
        if rows:
            self._losers.run(rows)

    def _record_presses(self, rows: Sequence[Press]) -> list[None]:
        with self._write("recording a press") as conn:
            conn.execute(insert(presses), [_press_values(press) for press in rows])
        return [None] * len(rows)

    def _press(self, conn: Connection, press: Press) -> None:
        conn.execute(insert(presses).values(**_press_values(press)))

    def finish_action(
        self,
        action_id: int,
        status: ActionStatus,
        answer: str,
        now: datetime,
        event: str,
        detail: str | None = None,
    ) -> bool:
        """Move a started journal row to done, failed or interrupted; False when it had
        already moved. The incident's history gets ``detail`` (else the answer).

        An action that failed or was interrupted did not happen, though it was
        decided: the decision that started it is lifted in the same transaction,
        so whoever reads the event finds the incident's buttons offered again.
        """
        at = to_epoch(now)
        with self._write("finishing an action") as conn:
            row = conn.execute(
                select(actions.c.incident_id, actions.c.started_at).where(actions.c.id == action_id)
            ).one()
            moved = conn.execute(
                update(actions)
                .where(actions.c.id == action_id, actions.c.status == ActionStatus.STARTED.value)
                .values(status=status.value, finished_at=at, answer=answer[:2000])
            ).rowcount
            if moved and status in {ActionStatus.FAILED, ActionStatus.INTERRUPTED}:
                # Only the decision this action carried out: a later one stands.
                conn.execute(
                    update(incidents)
                    .where(
                        incidents.c.id == row.incident_id,
                        incidents.c.decided_at == row.started_at,
                    )
                    .values(decided_at=None, decided_by=None, decided_via=None, decided_action=None)
                )
            if moved:
                _event(conn, row.incident_id, at, event, detail or answer)
        return bool(moved)

    def started_actions(self) -> list[ActionRecord]:
        """Journal rows still in ``started``."""
        with self._read("reading the action journal") as conn:
            rows = conn.execute(
                select(actions).where(actions.c.status == ActionStatus.STARTED.value)
            ).all()
        return [_record(row) for row in rows]

    def interrupt(self, action_id: int, now: datetime, note: str) -> bool:
        """Mark a started row interrupted (never to be run again), lift its decision and tell
        the incident."""
        return self.finish_action(
            action_id, ActionStatus.INTERRUPTED, note, now, "action_interrupted"
        )

    def actions_for_incident(self, incident_id: int) -> list[ActionRecord]:
        """The journal of one incident, oldest first."""
        statement = (
            select(actions).where(actions.c.incident_id == incident_id).order_by(actions.c.id)
        )
        with self._read("reading the action journal") as conn:
            return [_record(row) for row in conn.execute(statement)]

    def actions_for_work(
        self, kind: str, run_id: str, since: datetime | None = None
    ) -> list[ActionRecord]:
        """The journal of one piece of work, optionally since a time."""
        statement = select(actions).where(actions.c.kind == kind, actions.c.run_id == run_id)
        if since is not None:
            statement = statement.where(actions.c.started_at >= to_epoch(since))
        with self._read("reading the action journal") as conn:
            return [_record(row) for row in conn.execute(statement.order_by(actions.c.id))]

    def presses_for(self, incident_id: int) -> list[Press]:
        """Every press on an incident, oldest first."""
        statement = (
            select(presses).where(presses.c.incident_id == incident_id).order_by(presses.c.id)
        )
        with self._read("reading presses") as conn:
            rows = conn.execute(statement).all()
        return [record_from_row(Press, row, times=("at",)) for row in rows]

    def suppressed_keys(self, kinds: Sequence[str], run_id: str | None = None) -> set[IncidentKey]:
        """Keys of dismissed incidents: never reported again (of one run, given ``run_id``)."""
        statement = select(
            incidents.c.kind, incidents.c.run_id, incidents.c.condition, incidents.c.fingerprint
        ).where(incidents.c.suppressed.is_(True), incidents.c.kind.in_(list(kinds)))
        if run_id is not None:
            statement = statement.where(incidents.c.run_id == run_id)
        with self._read("reading dismissed incidents") as conn:
            return {IncidentKey(*row) for row in conn.execute(statement)}

    def runbook_switches(self) -> dict[str, tuple[bool, str, datetime]]:
        """Switches set over the API: name -> (enabled, by whom, when)."""
        with self._read("reading runbook switches") as conn:
            rows = conn.execute(select(runbook_switches)).all()
        result = {}
        for row in rows:
            at = from_epoch(row.updated_at)
            assert at is not None
            result[row.name] = (bool(row.enabled), row.updated_by, at)
        return result

    def set_runbook(self, name: str, enabled: bool, by: str, now: datetime) -> None:
        """Switch a runbook on or off (an upsert written portably)."""
        values = {"enabled": enabled, "updated_by": by[:200], "updated_at": to_epoch(now)}
        with self._write("switching a runbook") as conn:
            upsert(conn, runbook_switches, {"name": name}, values)
